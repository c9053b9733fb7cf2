#!/usr/bin/env python3
"""Runs one lj_merge fixture case and compares its folded output.

A case file (tests/lj_merge/cases/NAME.case):

    # free comment: how the input was made, why these stacks
    input: fakevm-raw.txt            (relative to tests/lj_merge/fixtures)
    args: --lines --jitdump {fixtures}/fakevm
    expect:
    root;frame;...;leaf COUNT        (written by hand, any order)
    ...

{fixtures} expands to the fixtures directory. The case passes when
lj_merge exits 0 and prints exactly the expected lines (order ignored).
`input:` may name several files (e.g. the same samples printed with and
without perf inject): each of them must give exactly the expected lines.
Then each input is repeated until it spans several of the blocks
lj_merge reads, and must give every expected count times the copies: as
a whole (its times start over with each copy), each blank-line separated
part in place (times stay in order), and that twice (times start over
once, between blocks). Past its first block lj_merge folds samples of
the usual kind by their text (perfscript.Reader.tallies) where what it
knows of their dynamic frames holds at the block's times, else takes
them one by one: this checks both against the same hand-written stacks.
usage: run_case.py [--lj-merge PATH] CASE..."""
import os
import shlex
import subprocess
import sys
import tempfile

os.environ["PYTHONDONTWRITEBYTECODE"] = "1"     # no __pycache__ in the source tree

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
DEFAULT_LJ_MERGE = os.path.join(HERE, "..", "..", "perf-script", "lj_merge.py")


def parse_case(path):
    case = {"args": "", "expect": []}
    with open(path) as f:
        lines = f.read().splitlines()
    in_expect = False
    for ln in lines:
        if in_expect:
            if ln.strip() and not ln.startswith("#"):
                case["expect"].append(ln.rstrip())
            continue
        if not ln.strip() or ln.startswith("#"):
            continue
        key, _, val = ln.partition(":")
        key = key.strip()
        if key == "expect":
            in_expect = True
        elif key in ("input", "args"):
            case[key] = val.strip()
        else:
            raise SystemExit("%s: unknown key %r" % (path, key))
    if "input" not in case:
        raise SystemExit("%s: no input:" % path)
    return case


# Repeated inputs span at least this much: several of lj_merge's blocks
# (perfscript.BLOCK, 256 KiB).
REPEAT_BYTES = 1 << 20


def times(expect, n):
    """Expected folded lines with every count N times."""
    out = []
    for ln in expect:
        stack, _, count = ln.rpartition(" ")
        out.append("%s %d" % (stack, int(count) * n))
    return sorted(out)


def run(lj_merge, path):
    case = parse_case(path)
    args = [a.replace("{fixtures}", FIXTURES) for a in shlex.split(case["args"])]
    name = os.path.basename(path)
    ok = True
    with tempfile.TemporaryDirectory(prefix="ljm-case.") as tmp:
        for inp in shlex.split(case["input"]):
            src = os.path.join(FIXTURES, inp)
            ok = check(lj_merge, name, inp, args, src, sorted(case["expect"])) and ok
            with open(src, "rb") as f:
                data = f.read()
            if not data.endswith(b"\n"):
                sys.exit("%s: %s does not end with a newline: it cannot be repeated" % (name, inp))
            n = REPEAT_BYTES // len(data) + 2
            each = b"\n\n".join(p for p in data.split(b"\n\n") for _ in range(n))
            for how, text, k in (("x%d" % n, data * n, n),
                                 ("each part x%d" % n, each, n),
                                 ("(each part x%d) x2" % n, each + b"\n" + each, 2 * n)):
                rep = os.path.join(tmp, "rep")
                with open(rep, "wb") as f:
                    f.write(text)
                ok = check(lj_merge, name, "%s %s" % (inp, how), args, rep,
                           times(case["expect"], k)) and ok
    return ok


def check(lj_merge, name, inp, args, path, want):
    """Runs lj_merge ARGS PATH; its stacks must be WANT."""
    cmd = [sys.executable, lj_merge] + args + [path]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    got = sorted(l for l in p.stdout.splitlines() if l.strip())
    if p.returncode == 0 and got == want:
        print("ok   %s: %s (%d stacks)" % (name, inp, len(got)))
        return True
    print("FAIL %s: %s (exit %d)\n  cmd: %s" % (name, inp, p.returncode, " ".join(cmd)))
    for l in want:
        if l not in got:
            print("  missing:    " + l)
    for l in got:
        if l not in want:
            print("  unexpected: " + l)
    if p.stderr:
        print("  stderr: " + p.stderr.strip().replace("\n", "\n          "))
    return False


def main():
    argv = sys.argv[1:]
    lj = os.environ.get("LJ_MERGE", DEFAULT_LJ_MERGE)
    if argv[:1] == ["--lj-merge"]:
        lj = argv[1]
        argv = argv[2:]
    if not argv:
        argv = sorted(os.path.join(HERE, "cases", n)
                      for n in os.listdir(os.path.join(HERE, "cases")) if n.endswith(".case"))
    ok = all([run(lj, c) for c in argv])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
