#!/usr/bin/env python3
"""Run a LuaJIT-test-cleanup-style suite (test.lua) under two interpreters
and compare the result of every test.

    run.py [options] SUITE/test.lua A B [-- TEST.LUA-ARGS...]

A is the interpreter under test (e.g. build/bin/luajit, run with
--env LUAJIT_PERF=1), B the control (e.g. build/bin/luajit-base). Both run
the same test.lua with the same arguments (tags such as +slow -ffi, test
numbers), in the suite's directory, with the same environment except the
--env variables, which only A gets (--env-both: both).

test.lua prints "[i/N] file --- name" before each test and the error after
a failing one; it ends with "N passed" or "N passed, M failed" and the
failing numbers. A run that ends without that summary crashed (or timed
out) in the last test it announced; with --resume (the default) the suite
is run again from the next test (test.lua's number arguments), so one crash
does not hide the rest.

Output: one line per test that did not pass on both (--all: every test),
"i name: A-status | B-status" (tests are matched by name; i is A's number),
a failure's first error line (hex addresses masked) in brackets, "DIFF"
when A and B differ; then every stderr line that only one interpreter
wrote (test.lua reports on stdout, so stderr holds the interpreter's own
messages; each counts as a difference); then one summary line.
Exit status 0 when every test has the same result on A and B (failures
included), 1 on any difference or when a run announced no test at all
(e.g. test.lua could not load a file), 2 on a usage error.

--perf-tmp: A writes its jitdumps (LUAJIT_PERF_DIR) into a temporary
directory, removed at the end with the /tmp/perf-PID.map of every process
that wrote one there.

ctest runs it as luajit_suite.lj_tests (configured with
-DLJPERF_LUAJIT_TESTS=PATH, tests/luajit_suite/CMakeLists.txt) on
LuaJIT-tests from tarantool/luajit, whose C helpers (libctest, libcpptest
from test/LuaJIT-tests/src) it builds. By hand, from the source root, with
those helpers built and found via --env-both LUA_CPATH='/tmp/ljlibs/?.so;;'
(require) and --env-both LD_LIBRARY_PATH=/tmp/ljlibs (ffi.load):

    python3 -m tests.luajit_suite.run --env LUAJIT_PERF=1 --perf-tmp \\
        --env-both 'LUA_CPATH=/tmp/ljlibs/?.so;;' \\
        --env-both LD_LIBRARY_PATH=/tmp/ljlibs \\
        /path/to/LuaJIT-tests/test.lua build/bin/luajit build/bin/luajit-base \\
        -- +slow +ffi +bit +jit
"""

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

HEADER = re.compile(r"^\[\s*(\d+)/(\d+)\] (.*)$")
SUMMARY = re.compile(r"^(\d+) passed(?:, (\d+) failed)?$")
FAILLIST = re.compile(r"^to run just failing tests, pass command line arguments: ([\d ]+)$")
HEX = re.compile(r"0x[0-9a-fA-F]+")


def run_once(cmd, cwd, env, timeout):
    """Run the suite once. Returns (tests, fails, ended, rc, last):
    tests {i: name}, errors {i: [lines]}, fail numbers (set or None when
    there is no summary), return code (None: timeout), last announced i."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = e.stdout or b"", e.stderr or b"", None
    stderr = [HEX.sub("0x?", l.rstrip())
              for l in err.decode("utf-8", "replace").splitlines() if l.strip()]
    tests, errors, fails, total = {}, {}, None, None
    cur, summary_fails = None, None
    for line in out.decode("utf-8", "replace").splitlines():
        m = HEADER.match(line)
        if m:
            cur = int(m.group(1))
            total = int(m.group(2))
            tests[cur] = m.group(3)
            continue
        m = SUMMARY.match(line)
        if m:
            summary_fails = int(m.group(2) or 0)
            fails = set()
            cur = None
            continue
        m = FAILLIST.match(line)
        if m and fails is not None:
            fails = {int(x) for x in m.group(1).split()}
            continue
        if cur is not None:
            errors.setdefault(cur, []).append(line)
    if fails is not None and summary_fails and not fails:
        # Every test that ran failed: test.lua prints no list then.
        fails = set(tests)
    last = max(tests) if tests else None
    if last is None:
        tail = out.decode("utf-8", "replace").strip().splitlines()[:1]
        errors[None] = tail
    return tests, errors, fails, rc, last, total, stderr


def run_suite(interp, suite, args, env, timeout, resume):
    """Returns ({i: (name, status, message)}, notes, stderr lines)."""
    cwd = os.path.dirname(os.path.abspath(suite))
    base = shlex.split(interp) + [os.path.abspath(suite)]
    results, notes, stderr = {}, [], []
    numbers = None          # None: the whole plan
    while True:
        cmd = base + list(args) + ([str(n) for n in numbers] if numbers else [])
        tests, errors, fails, rc, last, total, err = run_once(cmd, cwd, env, timeout)
        stderr += err
        for i, name in tests.items():
            msg = ""
            err = [l for l in errors.get(i, []) if l.strip()]
            if err:
                msg = HEX.sub("0x?", err[0].strip())
            if fails is not None:
                status = "fail" if i in fails else "pass"
            elif i == last:
                if rc is None:
                    status = "timeout"
                elif rc < 0:
                    status = "crash:" + signal.Signals(-rc).name
                else:
                    status = "died:rc=%d" % rc
                if not msg:
                    msg = " / ".join(HEX.sub("0x?", l.strip()) for l in err[-2:])
            else:
                # Announced and followed by another test: it returned. Its
                # fate (fail or pass) is known only from the summary.
                status = "fail?" if err else "pass"
            results[i] = (name, status, msg if status != "pass" else "")
        if fails is not None:
            if rc not in (0, 1):
                notes.append("exit status %s after the summary" % rc)
            break
        if last is None:
            notes.append("ERROR no test announced (rc=%s): %s: %s" % (
                rc, " ".join(cmd), " ".join(errors.get(None, []))))
            break
        rest = [n for n in range(last + 1, (total or 0) + 1)
                if numbers is None or n in numbers]
        notes.append("test %d %s (%s)" % (last, results[last][1], results[last][0]))
        if not resume or not rest:
            break
        numbers = rest
    return results, notes, stderr


def parse_env(items):
    env = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise SystemExit("run.py: --env wants NAME=VALUE, not %r" % item)
        env[k] = v
    return env


def compare_tests(ka, kb, show_all):
    """Prints the tests of runs KA and KB ({(name, ordinal): (number,
    status, message)}) that differ or did not pass (all with SHOW_ALL);
    returns how many differ."""
    order = sorted(set(ka) | set(kb),
                   key=lambda k: (ka.get(k) or kb.get(k))[0])
    diffs = 0
    for key in order:
        name = key[0]
        i, sa, ma = ka.get(key, (kb.get(key, (0,))[0], "notrun", ""))
        _, sb, mb = kb.get(key, (i, "notrun", ""))
        differ = (sa, ma) != (sb, mb)
        diffs += differ
        if differ or show_all or sa != "pass" or sb != "pass":
            ea = " [%s]" % ma if ma else ""
            eb = " [%s]" % mb if mb and mb != ma else ""
            print("%5d %s: A %s%s | B %s%s%s" % (i, name, sa, ea, sb, eb,
                                                  "  DIFF" if differ else ""))
    return diffs


def compare_stderr(se_a, se_b):
    """test.lua writes to stdout; anything on stderr (the interpreter's own
    messages) must be the same on both. Returns the lines only one has."""
    diffs = 0
    for tag, mine, other in (("A", se_a, se_b), ("B", se_b, se_a)):
        rest = list(other)
        for line in mine:
            if line in rest:
                rest.remove(line)
            else:
                print("stderr %s only: %s  DIFF" % (tag, line))
                diffs += 1
    return diffs


def main():
    ap = argparse.ArgumentParser(
        description="Run a LuaJIT-test-cleanup-style test.lua under two "
        "interpreters (A: under test, B: control) and compare every test.",
        epilog="Arguments after -- go to test.lua (tags like +slow -ffi, "
        "test numbers). Exit 0: same results on A and B; 1: a difference.")
    ap.add_argument("suite", help="the suite's test.lua")
    ap.add_argument("a", help="interpreter under test (may carry arguments, shell-quoted)")
    ap.add_argument("b", help="control interpreter")
    ap.add_argument("--env", action="append", metavar="NAME=VALUE",
                    help="set for A only (repeatable), e.g. LUAJIT_PERF=1")
    ap.add_argument("--env-both", action="append", metavar="NAME=VALUE",
                    help="set for A and B (repeatable), e.g. LUA_CPATH=...")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds per suite run (default 1800)")
    ap.add_argument("--no-resume", action="store_true",
                    help="do not continue after a crash")
    ap.add_argument("--perf-tmp", action="store_true",
                    help="A's jitdumps into a temporary directory, removed after "
                         "with the perf maps of the processes that wrote them")
    ap.add_argument("--all", action="store_true",
                    help="print every test, not only those that did not pass on both")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    o = ap.parse_args()
    args = o.rest[1:] if o.rest[:1] == ["--"] else o.rest
    if not os.path.isfile(o.suite):
        ap.error("no such file: %s" % o.suite)
    # The runs happen in the suite's directory: a relative interpreter path
    # is made absolute first.
    for name in ("a", "b"):
        words = shlex.split(getattr(o, name))
        if not words:
            ap.error("%s: empty interpreter" % name.upper())
        if os.sep in words[0]:
            words[0] = os.path.abspath(words[0])
        if not shutil.which(words[0]):
            ap.error("%s: not an executable: %s" % (name.upper(), words[0]))
        setattr(o, name, shlex.join(words))

    both = dict(os.environ)
    both.update(parse_env(o.env_both))
    env_a = dict(both)
    env_a.update(parse_env(o.env))

    perf_tmp = tempfile.mkdtemp(prefix="ljperf-suite-") if o.perf_tmp else None
    if perf_tmp:
        env_a["LUAJIT_PERF_DIR"] = perf_tmp
    try:
        ra, na, se_a = run_suite(o.a, o.suite, args, env_a, o.timeout, not o.no_resume)
    finally:
        if perf_tmp:
            from tests.lib.ljptest import dump_pids, remove_tmp_files
            remove_tmp_files(dump_pids(perf_tmp))
            shutil.rmtree(perf_tmp, ignore_errors=True)
    rb, nb, se_b = run_suite(o.b, o.suite, args, both, o.timeout, not o.no_resume)

    # Tests are matched by name (file --- name, and its ordinal among tests
    # of the same name), not by number: if the two plans differ (a tag that
    # one interpreter has), the numbers shift but the names still match.
    def by_name(r):
        out, seen = {}, {}
        for i in sorted(r):
            name = r[i][0]
            seen[name] = seen.get(name, 0) + 1
            out[(name, seen[name])] = (i,) + r[i][1:]
        return out
    diffs = compare_tests(by_name(ra), by_name(rb), o.all)
    diffs += compare_stderr(se_a, se_b)
    for tag, notes in (("A", na), ("B", nb)):
        for n in notes:
            print("note %s: %s" % (tag, n))

    def count(r):
        c = {}
        for _, s, _ in r.values():
            k = s.split(":")[0].rstrip("?")
            c[k] = c.get(k, 0) + 1
        return ", ".join("%d %s" % (v, k) for k, v in sorted(c.items()))
    print("%s: A %s | B %s | %d difference%s" % (
        "SAME" if not diffs else "DIFFERENT", count(ra), count(rb), diffs,
        "" if diffs == 1 else "s"))
    if any(n.startswith("ERROR") for n in na + nb):
        return 1
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
