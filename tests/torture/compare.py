#!/usr/bin/env python3
"""Run the same command line on the patched and the control program and
compare exit status, stdout and stderr byte for byte.

Typical use (what ctest does):

  compare.py --patched build/bin/luajit --base build/bin/luajit-base \
             --cwd tests/torture -- -joff progs/errors_deep.lua

Both programs get identical arguments, an identical argv[0] (--argv0,
default "luajit", so messages prefixed with the program name match) and an
identical environment, except for --patched-env NAME=VALUE settings, which are
given to the patched program only (e.g. LUAJIT_PERF=frames; the control VM
ignores it). --valgrind runs only the patched program under
"valgrind --error-exitcode=99 -q" (a memory check of the patched VM; the
control run gives the reference output).

--expect-from PROG takes --expect-status and --mask-c-addresses from PROG's
"-- compare: OPTION" comment lines, so a program states what it expects once
for every runner (ctest's torture tests, tests/arm64/test_suites.py).

Exit status: 0 when everything matches (and the control's status equals
--expect-status), 1 on a mismatch (a unified diff is printed), 2 on usage or
execution problems, including timeouts.
"""

import argparse
import difflib
import os
import re
import shlex
import subprocess
import sys

from tests.lib import ljptest

VALGRIND = ["valgrind", "--error-exitcode=99", "-q"]

# "[C]: at 0x55d0c0ffee00" lines in tracebacks name a C function by address;
# the standalone interpreter's own bottom frame (pmain) always shows one in
# uncaught-error tracebacks. Only masked with --mask-c-addresses.
C_ADDR = re.compile(rb"\[C\]: at 0x[0-9a-f]+")


# Options a program may state for itself (--expect-from).
PROGRAM_OPTIONS = ("--expect-status", "--mask-c-addresses")
DECLARATION = re.compile(r"^--\s*compare:\s*(.*?)\s*$")


def usage_error(msg):
    """Exit status 2 (a usage problem), as the docstring promises."""
    sys.stderr.write("compare.py: %s\n" % msg)
    sys.exit(2)


def program_options(path):
    """The options PATH's "-- compare: ..." lines state (shell words)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as e:
        usage_error("--expect-from %s: %s" % (path, e.strerror))
    words = []
    for line in lines:
        m = DECLARATION.match(line)
        if m:
            words += shlex.split(m.group(1))
    for w in words:
        if w.startswith("-") and w not in PROGRAM_OPTIONS:
            usage_error("%s states %s; a program may state only %s"
                        % (path, w, ", ".join(PROGRAM_OPTIONS)))
    return words


def parse_env(items, what):
    env = {}
    for item in items or []:
        if "=" not in item:
            usage_error("%s expects NAME=VALUE, got %r" % (what, item))
        name, value = item.split("=", 1)
        env[name] = value
    return env


def run(label, program, args, env, cwd, argv0, timeout, wrapper):
    # argv[0] is forced to the same string for both programs; the real path
    # is passed through "executable" (or as an argument of the wrapper).
    if wrapper:
        cmd = wrapper + [program] + args
        executable = None
    else:
        cmd = [argv0] + args
        executable = program
    try:
        p = subprocess.Popen(cmd, executable=executable, env=env, cwd=cwd,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    except OSError as e:
        print("compare.py: cannot run %s (%s): %s" % (label, program, e))
        sys.exit(2)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        print("compare.py: %s timed out after %ss: %s" %
              (label, timeout, " ".join(shlex.quote(c) for c in cmd)))
        for name, data in (("stdout", out), ("stderr", err)):
            if data:
                print("--- %s %s (partial, last 2000 bytes) ---" % (label, name))
                print(data[-2000:].decode("utf-8", "replace"))
        sys.exit(2)
    finally:
        remove_perf_files(p.pid)
    return p.returncode, out, err


def remove_perf_files(pid):
    """A patched VM run with perf output enabled (e.g. --patched-env
    LUAJIT_PERF=1) leaves /tmp/perf-PID.map and jit-PID.dump behind; they
    belong to this test run, so remove them."""
    ljptest.remove_tmp_files([pid])


def describe_status(rc):
    if rc < 0:
        return "killed by signal %d" % -rc
    return "exit %d" % rc


def show_diff(name, base, patched):
    a = base.decode("utf-8", "backslashreplace").splitlines(keepends=True)
    b = patched.decode("utf-8", "backslashreplace").splitlines(keepends=True)
    diff = list(difflib.unified_diff(a, b, "base/" + name, "patched/" + name))
    out = "".join(d if d.endswith("\n") else d + "\n\\ No newline at end of file\n"
                  for d in diff)
    if len(out) > 20000:
        out = out[:20000] + "\n[diff truncated]\n"
    sys.stdout.write(out)


def make_parser():
    ap = argparse.ArgumentParser(
        description="Compare patched vs control runs byte for byte.",
        epilog="Arguments after -- are passed to both programs.")
    ap.add_argument("--patched", required=True, help="patched program (e.g. bin/luajit)")
    ap.add_argument("--base", required=True, help="control program (e.g. bin/luajit-base)")
    ap.add_argument("--cwd", default=None, help="working directory for both runs")
    ap.add_argument("--argv0", default="luajit", help="argv[0] given to both programs")
    ap.add_argument("--env", action="append", metavar="NAME=VALUE",
                    help="environment for both programs (repeatable)")
    ap.add_argument("--patched-env", action="append", metavar="NAME=VALUE",
                    help="extra environment for the patched program only (repeatable)")
    ap.add_argument("--expect-status", type=int, default=0,
                    help="exit status the control run must have (default 0)")
    ap.add_argument("--expect-from", metavar="PROG",
                    help="take --expect-status and --mask-c-addresses from PROG's "
                         "'-- compare: ...' lines (given on the command line, they win)")
    ap.add_argument("--require-output", action="store_true",
                    help="fail if the control run printed nothing on stdout")
    ap.add_argument("--mask-c-addresses", action="store_true",
                    help="replace '[C]: at 0x...' by '[C]: at 0xADDR' in both "
                         "outputs before comparing (standalone tracebacks)")
    ap.add_argument("--valgrind", action="store_true",
                    help="run the patched program under valgrind --error-exitcode=99 -q")
    ap.add_argument("--valgrind-arg", action="append", default=[],
                    help="extra valgrind option (repeatable), with --valgrind")
    # Both runs must end before ctest's 120 s TIMEOUT: ctest kills only
    # this script, and a program it was waiting for would run on.
    ap.add_argument("--timeout", type=float, default=50.0,
                    help="seconds per run (default 50)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print the commands and the control's output")
    ap.add_argument("args", nargs="*", help="arguments for both programs")
    return ap


def parse_args(argv):
    ap = make_parser()
    opts = ap.parse_args(argv)
    if opts.expect_from:
        # The program's words first, so the command line's come later and win.
        opts = ap.parse_args(program_options(opts.expect_from) + argv)
    return opts


def main():
    opts = parse_args(sys.argv[1:])

    common = parse_env(opts.env, "--env")
    pextra = parse_env(opts.patched_env, "--patched-env")
    base_env = dict(os.environ)
    # Variables that would make the runs differ from each other or from the
    # test's intent are removed; tests set what they need with --env.
    for name in ("LUA_PATH", "LUA_CPATH", "LUA_INIT", "LUAJIT_PERF"):
        base_env.pop(name, None)
    base_env.update(common)
    patched_env = dict(base_env)
    patched_env.update(pextra)

    wrapper = None
    if opts.valgrind:
        wrapper = VALGRIND + opts.valgrind_arg
        # valgrind needs the real path; argv[0] becomes the real path there,
        # so the control must see the same argv[0].
        opts.argv0 = opts.patched
        if opts.timeout < 1200:
            opts.timeout = opts.timeout * 20

    if opts.verbose:
        print("args:", " ".join(shlex.quote(a) for a in opts.args))
        if pextra:
            print("patched-only env:", " ".join("%s=%s" % kv for kv in pextra.items()))

    rb, ob, eb = run("base", opts.base, opts.args, base_env, opts.cwd,
                     opts.argv0, opts.timeout, None)
    rp, op, ep = run("patched", opts.patched, opts.args, patched_env, opts.cwd,
                     opts.argv0, opts.timeout, wrapper)

    if opts.mask_c_addresses:
        ob, op, eb, ep = (C_ADDR.sub(b"[C]: at 0xADDR", x) for x in (ob, op, eb, ep))

    if opts.verbose:
        sys.stdout.write(ob.decode("utf-8", "backslashreplace"))

    if mismatches(opts, (rb, ob, eb), (rp, op, ep)):
        print("FAIL: %s" % " ".join(shlex.quote(a) for a in opts.args))
        return 1
    print("OK: identical (%s, %d bytes stdout, %d bytes stderr)" %
          (describe_status(rb), len(ob), len(eb)))
    return 0


def mismatches(opts, base, patched):
    """Prints how the control run BASE and the PATCHED one (status, stdout,
    stderr) differ, and what the control did wrong; True if anything."""
    rb, ob, eb = base
    rp, op, ep = patched
    failed = False
    if rb != rp:
        print("MISMATCH exit status: base %s, patched %s" %
              (describe_status(rb), describe_status(rp)))
        if opts.valgrind and rp == 99:
            print("(99 = valgrind reported errors; see patched stderr below)")
        failed = True
    if ob != op:
        print("MISMATCH stdout (%d vs %d bytes):" % (len(ob), len(op)))
        show_diff("stdout", ob, op)
        failed = True
    if eb != ep:
        print("MISMATCH stderr (%d vs %d bytes):" % (len(eb), len(ep)))
        show_diff("stderr", eb, ep)
        failed = True
    if rb != opts.expect_status:
        print("UNEXPECTED control status: %s, expected exit %d" %
              (describe_status(rb), opts.expect_status))
        if eb:
            print("--- control stderr (last 3000 bytes) ---")
            print(eb[-3000:].decode("utf-8", "backslashreplace"))
        failed = True
    if opts.require_output and not ob:
        print("control printed nothing on stdout")
        failed = True
    return failed


if __name__ == "__main__":
    sys.exit(main())
