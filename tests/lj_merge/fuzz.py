#!/usr/bin/env python3
"""lj_merge on mutated real perf script text: never an internal error.

usage: fuzz.py [-v]                         (ctest lj_merge.fuzz; < 1 minute)

Takes real captures from fixtures/ (with the arguments their cases use) and
mutates each with fixed seeds, five ways: byte flips, cut lines (a byte
range removed), dropped fields (a header token, a frame's symbol or DSO, a
register line), random inserts (bytes or whole lines), truncation. For
every mutated input:

  1. lj_merge returns 0, writes no traceback and no "internal error";
  2. every sample the mutation left whole (its bytes, the newline before
     it and its end untouched) is folded: each stack that sample gives on
     its own (with the side-band lines of the file) is in the output with
     at least the weight of the whole samples that give it.

Runs lj_merge in this process (lj_merge.main) for speed, and a few inputs
through the command line ($LJ_MERGE) as users run it."""

import contextlib
import io
import os
import random
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")
PERF_SCRIPT = os.path.normpath(os.path.join(HERE, "..", "..", "perf-script"))
LJ_MERGE = os.environ.get("LJ_MERGE", os.path.join(PERF_SCRIPT, "lj_merge.py"))

from ljperf import merge_cli as lj_merge

# (input, arguments) as the cases/ run them
INPUTS = [
    ("cstack.txt", "--jitdump {f}/nodump"),
    ("fakevm-rawF.txt", "--lines --jit-tag --tid --jitdump {f}/fakevm"),
    ("fakevm-injectF.txt", "--lines --jit-tag --tid --jitdump {f}/fakevm"),
    ("real/jit/raw.txt", "--jitdump {f}/real/jit"),
    ("real/ffi/rawF.txt", "--lines --jitdump {f}/real/ffi"),
    ("real/coro/injectF.txt", "--jitdump {f}/real/coro"),
    ("real/fork/rawF.txt", "--pid --jitdump {f}/real/fork"),
    ("real/interp/raw.txt", "--lines --jitdump {f}/real/interp"),
    ("nocallchain.txt", "--pid --jitdump {f}/nodump"),
    ("sys.txt", "--jitdump {f}/nodump"),
]
SEEDS = range(7)
CLI_RUNS = 8            # of the mutated inputs, also through the command line


def is_header(line):
    """A sample's first line, as the fixtures have them (no srcline)."""
    s = line.strip()
    return bool(s) and line[0] != "\t" and not s.startswith(("#", "ABI:")) \
        and "PERF_RECORD_" not in line


def split(data):
    """(side-band lines, [(start, end) byte range of each sample]); a sample
    runs from its header to the next header or side-band line."""
    side, samples = [], []          # side: (byte offset, line)
    pos = 0
    start = None
    for line in data.split(b"\n"):
        text = line.decode("utf-8", "replace")
        if is_header(text) or "PERF_RECORD_" in text:
            if start is not None:
                samples.append((start, pos))
                start = None
            if is_header(text):
                start = pos
            else:
                side.append((pos, line))
        pos += len(line) + 1
    if start is not None:
        samples.append((start, min(pos, len(data))))
    return side, samples


def run_inproc(args, data, tmp):
    """lj_merge.main on DATA: (exit status, {stack: weight}, stderr)."""
    inp = os.path.join(tmp, "in.txt")
    out = os.path.join(tmp, "out.txt")
    with open(inp, "wb") as f:
        f.write(data)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            rc = lj_merge.main(args + ["-o", out, inp])
    except SystemExit as e:
        rc = e.code
    except BaseException as e:          # what entry() would call an internal error
        return "exception %s: %s" % (type(e).__name__, e), {}, err.getvalue()
    stacks = {}
    if os.path.exists(out):
        with open(out, encoding="utf-8", errors="replace", newline="\n") as f:
            for ln in f:
                s, _, n = ln.rstrip("\n").rpartition(" ")
                stacks[s] = stacks.get(s, 0) + int(n)
        os.unlink(out)
    return rc, stacks, err.getvalue()


# Mutations: each returns (new data, damaged original byte range [a, b)).

def flip(rnd, data):
    out = bytearray(data)
    i = rnd.randrange(len(data))
    lo = hi = i
    for _ in range(rnd.randint(1, 4)):
        j = min(len(data) - 1, max(0, i + rnd.randint(-40, 40)))
        out[j] ^= rnd.choice((1, 0x20, 0x0a ^ 0x09, 0xff, rnd.randrange(1, 256)))
        lo, hi = min(lo, j), max(hi, j + 1)
    return bytes(out), (lo, hi)


def cut(rnd, data):
    a = rnd.randrange(len(data))
    b = min(len(data), a + rnd.choice((1, 5, 30, 200, 1500)))
    return data[:a] + data[b:], (a, b)


def drop_field(rnd, data):
    lines = data.split(b"\n")
    i = rnd.randrange(len(lines))
    ln = lines[i]
    toks = ln.split(b" ")
    if ln.startswith(b"\t") and b" (" in ln and rnd.random() < 0.5:
        new = ln[:ln.rfind(b" (")]                        # the DSO
    elif ln.startswith(b"\t") and rnd.random() < 0.5:
        new = b"\t" + ln.split()[0] if ln.split() else ln   # symbol and DSO
    elif ln.startswith(b" ABI"):
        new = None                                       # the register line
    else:
        k = rnd.randrange(len(toks)) if toks else 0
        new = b" ".join(toks[:k] + toks[k + 1:])         # a header token
    start = sum(len(x) + 1 for x in lines[:i])
    lines[i:i + 1] = [] if new is None else [new]
    return b"\n".join(lines), (start, start + len(ln) + 1)


def insert(rnd, data):
    i = rnd.randrange(len(data) + 1)
    kind = rnd.randrange(3)
    if kind == 0:
        ins = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 60)))
    elif kind == 1:
        ins = bytes(rnd.choice(b"\t\n 0123456789abcdef:/()[]+x.;") for _ in
                    range(rnd.randint(1, 80)))
    else:                                    # a real line from elsewhere
        lines = data.split(b"\n")
        ins = rnd.choice(lines) + b"\n"
    return data[:i] + ins + data[i:], (i, i)


def truncate(rnd, data):
    i = rnd.randrange(1, len(data))
    return data[:i], (i, len(data))


MUTATIONS = (flip, cut, drop_field, insert, truncate)


def main():
    verbose = "-v" in sys.argv
    tmp = tempfile.mkdtemp(prefix="lj_merge_fuzz.")
    failures = []
    ncases = 0
    cli = []
    try:
        for name, argstr in INPUTS:
            args = argstr.replace("{f}", FIX).split()
            with open(os.path.join(FIX, name), "rb") as f:
                data = f.read()
            side, samples = split(data)
            prefix = b"".join(ln + b"\n" for _, ln in side)
            alone = []               # each sample's own stacks
            for a, b in samples:
                rc, st, err = run_inproc(args, prefix + data[a:b] + b"\n", tmp)
                if rc != 0:
                    failures.append("%s: sample at %d alone: %s %s" % (name, a, rc, err))
                alone.append(st)
            for mut in MUTATIONS:
                for seed in SEEDS:
                    rnd = random.Random("%s/%s/%d" % (name, mut.__name__, seed))
                    mdata, (lo, hi) = mut(rnd, data)
                    ncases += 1
                    what = "%s %s seed %d" % (name, mut.__name__, seed)
                    rc, got, err = run_inproc(args, mdata, tmp)
                    if rc != 0 or "Traceback" in err or "internal error" in err:
                        failures.append("%s: exit %s, stderr %r" % (what, rc, err[-300:]))
                        continue
                    want = {}
                    # whole: untouched from the newline before to the end;
                    # when side-band lines (forks) are damaged, samples may
                    # fold otherwise: then only the exit status is checked
                    if any(lo - 1 <= p + len(ln) and p - 1 <= hi for p, ln in side):
                        samples_ok = []
                    else:
                        samples_ok = list(zip(samples, alone))
                    for (a, b), st in samples_ok:
                        if b < lo - 1 or a - 1 > hi:
                            for s, w in st.items():
                                want[s] = want.get(s, 0) + w
                    miss = ["%s (%d, got %d)" % (s, w, got.get(s, 0))
                            for s, w in want.items() if got.get(s, 0) < w]
                    if miss:
                        failures.append("%s: whole samples not folded: %s"
                                        % (what, "; ".join(miss[:3])))
                    elif verbose:
                        print("ok   %s: %d stacks" % (what, len(got)))
                    if len(cli) < CLI_RUNS and seed == 0:
                        cli.append((what, args, mdata))
        for what, args, mdata in cli:        # as users run it
            p = subprocess.run([sys.executable, LJ_MERGE] + args + ["-"], input=mdata,
                               capture_output=True, timeout=120)
            err = p.stderr.decode("utf-8", "replace")
            if p.returncode != 0 or "Traceback" in err or "internal error" in err:
                failures.append("%s (command line): exit %d, %r" % (what, p.returncode, err))
    finally:
        for n in os.listdir(tmp):
            os.unlink(os.path.join(tmp, n))
        os.rmdir(tmp)
    for f in failures:
        print("FAIL " + f)
    print("%d mutated inputs (%d through the command line): %d failures"
          % (ncases, len(cli), len(failures)))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
