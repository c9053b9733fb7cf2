#!/usr/bin/env python3
"""Runs Tarantool's app-tap tests on the patched and the base tarantool.

Every test runs four times, each in a fresh temporary directory:
tarantool-base and tarantool, each with LUAJIT_PERF unset and set to 1.
The TAP result lines ("ok N - ...", "not ok N - ...", plans "1..N", at
every subtest level; whole stdout for tests that print no TAP) and the exit
status of the four runs must be equal. UUIDs, hex addresses and the run's
temporary directory in test names are masked; a test whose results come in
a different order (pairs() over tables keyed by tables, e.g. popen) is
equal if each subtest has the same multiset of result lines, and one whose
lines differ only in numbers (names that print the time or a child's pid:
datetime, gh-4983) is equal too; both are said in its line.
Whether the base run passes is reported, not required: a test that fails
for environmental reasons still has to fail the same way on both binaries.
"Passes" means: stdout equals the test's .result file if it has one (as
test-run checks it), else exit 0 with every top-level test ok and the plan
met.

Exit status: 0 if every test gave equal results in all runs, 1 otherwise,
2 on usage errors.
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
import time

from tests.lib import ljptest  # dump_pids

# The tests are those of the tree's test/app-tap directory (each version has
# its own set), less these, which need what test-run or Tarantool's own test
# build provides, or the network (tests/tarantool/CMakeLists.txt makes one
# ctest of each of the others).
EXCLUDED = {
    'debug': "test-run's server control",
    'inspector': "test-run's server control",
    'http_client': 'the network and a Python httpd',
    'module_api': "module_api.so, built by Tarantool's test suite",
    'tarantoolctl': 'tarantoolctl',
    'gh-2717-no-quit-sigint': 'an interactive console on a terminal (release_disabled)',
}


def tree_tests(source):
    """The app-tap tests of the Tarantool tree SOURCE, less EXCLUDED, sorted."""
    d = os.path.join(source, 'test', 'app-tap')
    names = sorted(n[:-len('.test.lua')] for n in os.listdir(d) if n.endswith('.test.lua'))
    return [n for n in names if n not in EXCLUDED]


TAP_RESULT = re.compile(r'^(\s*)(not ok|ok)\b(.*)$')
TAP_PLAN = re.compile(r'^(\s*)(\d+\.\.\d+)\b(.*)$')
TAP_BAIL = re.compile(r'^\s*Bail out!')
MASKS = [
    (re.compile(r'[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}'),
     '<uuid>'),
    (re.compile(r'0x[0-9a-fA-F]{6,}'), '<addr>'),
]


DIGITS = re.compile(r'\d+')


def unnumbered(lines):
    """LINES with every number masked: for test names that print the time
    or a child's pid (datetime, gh-4983), which differ from run to run."""
    return [DIGITS.sub('<n>', x) for x in lines]


def mask(line):
    for rx, repl in MASKS:
        line = rx.sub(repl, line)
    return line


def tap_lines(text):
    """Returns the TAP result and plan lines of TEXT (indentation kept)."""
    out = []
    for line in text.splitlines():
        line = line.rstrip()
        if TAP_RESULT.match(line) or TAP_PLAN.match(line) or TAP_BAIL.match(line):
            out.append(mask(line))
    return out


def blocks(lines):
    """Splits result lines into per-subtest sorted multisets (order-free form)."""
    out, cur, stack = [], [], []
    for line in lines:
        depth = len(line) - len(line.lstrip())
        while stack and depth < stack[-1][0]:
            out.append((stack[-1][0], sorted(cur)))
            cur = stack.pop()[1]
        if not stack or depth > stack[-1][0]:
            stack.append((depth, cur))
            cur = []
        cur.append(line)
    while stack:
        out.append((stack[-1][0], sorted(cur)))
        cur = stack.pop()[1]
    return sorted(out)


def summarize(lines):
    """Counts the top-level results: (ok, not_ok, plan)."""
    ok = not_ok = 0
    plan = None
    for line in lines:
        m = TAP_RESULT.match(line)
        if m and m.group(1) == '':
            if m.group(2) == 'ok':
                ok += 1
            else:
                not_ok += 1
        m = TAP_PLAN.match(line)
        if m and m.group(1) == '':
            plan = m.group(2)
    return ok, not_ok, plan


class Run:
    def __init__(self, label, rc, stdout, stderr, seconds):
        self.label = label
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds
        self.lines = tap_lines(stdout)
        if not self.lines:
            # No TAP at all (init_script, pcall, ...): compare all of stdout.
            self.lines = [mask(x.rstrip()) for x in stdout.splitlines()]
            self.tap = False
        else:
            self.tap = True

    def passed(self, expected):
        if expected is not None:
            return [x.rstrip() for x in self.stdout.splitlines()] == expected
        ok, not_ok, plan = summarize(self.lines)
        if self.rc != 0 or not_ok or plan is None or not self.tap:
            return False
        return plan == '1..%d' % ok


def run_one(binary, source, test, perf, timeout):
    """Runs TEST once with BINARY in a fresh temporary directory."""
    script = os.path.join(source, 'test', 'app-tap', test + '.test.lua')
    work = tempfile.mkdtemp(prefix='ljperf-apptap-')
    try:
        env = dict(os.environ)
        for var in ('LUAJIT_PERF', 'LUAJIT_PERF_DIR', 'LISTEN', 'ADMIN', 'MASTER',
                    'LUA_INIT', 'TEST_WORKDIR'):
            env.pop(var, None)
        if perf:
            env['LUAJIT_PERF'] = '1'
            env['LUAJIT_PERF_DIR'] = work
        # Tests run "tarantool" from PATH (minimal) or arg[-1] (fail_main):
        # both lead to this wrapper, which runs BINARY under the same pid and
        # notes that pid, so that their /tmp/perf-PID.map files can be removed.
        bindir = os.path.join(work, 'bin')
        os.mkdir(bindir)
        wrapper = os.path.join(bindir, 'tarantool')
        pidfile = os.path.join(work, 'tarantool.pids')
        with open(wrapper, 'w') as f:
            f.write('#!/bin/sh\necho $$ >> %s\nexec %s "$@"\n'
                    % (shlex.quote(pidfile), shlex.quote(binary)))
        os.chmod(wrapper, 0o755)
        env['PATH'] = bindir + os.pathsep + env.get('PATH', '/usr/bin:/bin')
        # As test-run does for app tests: a unix socket, no network.
        env['LISTEN'] = os.path.join(work, 'app_server.socket-iproto')
        lua = os.path.join(source, 'test', 'app-tap', 'lua')
        # What test-run provides: the suite's lua_libs, the source root,
        # test-run's helpers, and TMPDIR/cwd inside the fresh directory.
        env['LUA_PATH'] = ';'.join([
            lua + '/?.lua', os.path.join(source, 'test-run') + '/?.lua',
            source + '/?.lua', source + '/?/init.lua', ';'])
        env['LUA_CPATH'] = work + '/?.so;;'
        env['SOURCEDIR'] = source
        env['BUILDDIR'] = work
        env['TARANTOOL_SRC_DIR'] = source
        env['TMPDIR'] = work
        start = time.monotonic()
        started = time.time()
        proc = subprocess.Popen([wrapper, script], executable=binary, cwd=work, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            # The test and anything it started share our new session's group.
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            rc = 'timeout'
        seconds = time.monotonic() - start
        pids = {proc.pid}
        if os.path.exists(pidfile):
            with open(pidfile) as f:
                pids.update(int(x) for x in f.read().split() if x.isdigit())
        # A child the test's Tarantool forked (the logger's pipe, popen) gets
        # its files at fork, then runs another program: an empty perf map
        # (README, Workers as nobody). Its jitdump names its pid, here.
        pids |= ljptest.dump_pids(work)
        remove_perf_maps(pids, started)
        # Names that hold the run's own directory (the tarantool path of a
        # child it starts) are the same in every run with it masked.
        return (rc, out.decode('utf-8', 'replace').replace(work, '<work>'),
                err.decode('utf-8', 'replace'),
                seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def remove_perf_maps(pids, since):
    """Removes /tmp/perf-PID.map (the emitter's fixed path) of our PIDS."""
    for pid in pids:
        path = '/tmp/perf-%d.map' % pid
        try:
            if os.stat(path).st_mtime >= since - 1:
                os.unlink(path)
        except OSError:
            pass


def first_difference(a, b):
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else '<missing>'
        y = b[i] if i < len(b) else '<missing>'
        if x != y:
            return i, x, y
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--list', action='store_true',
                    help="print the tests of --source's test/app-tap (less those that need "
                         "test-run, the network or Tarantool's test build) and exit")
    ap.add_argument('--tarantool', help='patched tarantool binary')
    ap.add_argument('--tarantool-base', help='unpatched tarantool binary')
    ap.add_argument('--source', help='Tarantool source tree (has test/app-tap)')
    ap.add_argument('--timeout', type=float, default=120.0, help='seconds per run')
    ap.add_argument('-v', '--verbose', action='store_true',
                    help='print the output of runs that differ or fail')
    ap.add_argument('tests', nargs='*', help='test names (default: those --list prints)')
    args = ap.parse_args()
    if not args.source or not os.path.isdir(os.path.join(args.source, 'test', 'app-tap')):
        ap.error('--source must be a Tarantool source tree with test/app-tap')
    if args.list:
        print('\n'.join(tree_tests(args.source)))
        return 0
    if not (args.tarantool and args.tarantool_base):
        ap.error('--tarantool and --tarantool-base are required')

    args.tarantool = os.path.abspath(args.tarantool)
    args.tarantool_base = os.path.abspath(args.tarantool_base)
    for b in (args.tarantool, args.tarantool_base):
        if not os.access(b, os.X_OK):
            print('not an executable: %s' % b, file=sys.stderr)
            return 2
    source = os.path.abspath(args.source)
    tests = args.tests or tree_tests(source)
    for t in tests:
        if not os.path.isfile(os.path.join(source, 'test', 'app-tap', t + '.test.lua')):
            print('no such app-tap test: %s' % t, file=sys.stderr)
            return 2

    variants = [('base', args.tarantool_base, False), ('base+PERF', args.tarantool_base, True),
                ('patched', args.tarantool, False), ('patched+PERF', args.tarantool, True)]
    failures = 0
    for test in tests:
        failures += check_test(args, source, test, variants)
    return 1 if failures else 0


def check_test(args, source, test, variants):
    """Runs TEST on the four VARIANTS and prints its line; 1 if the runs
    differ from the base run, else 0."""
    expected = None
    result_file = os.path.join(source, 'test', 'app-tap', test + '.result')
    if os.path.isfile(result_file):
        with open(result_file, encoding='utf-8', errors='replace') as f:
            expected = [x.rstrip() for x in f.read().splitlines()]
    runs = []
    for label, binary, perf in variants:
        rc, out, err, secs = run_one(binary, source, test, perf, args.timeout)
        runs.append(Run(label, rc, out, err, secs))
    ref = runs[0]
    ok, not_ok, plan = summarize(ref.lines)
    passed = ref.passed(expected)
    status = 'PASS' if passed else 'FAIL'
    how = 'vs .result' if expected is not None else 'TAP'
    diffs, same = differences(ref, runs[1:])
    what = ('%d ok, %d not ok, plan %s' % (ok, not_ok, plan) if ref.tap
            else '%d stdout lines, no TAP' % len(ref.lines))
    print('%-14s base %s %s (exit %s, %s, %.1f s) | %s'
          % (test, status, how, ref.rc, what, ref.seconds, same))
    if not passed:
        explain(ref, expected)
    if args.verbose and (diffs or not passed):
        for r in runs:
            print('----- %s (exit %s) stdout -----' % (r.label, r.rc))
            print(r.stdout.rstrip())
            print('----- %s stderr -----' % r.label)
            print(r.stderr.rstrip())
    sys.stdout.flush()
    return 1 if diffs else 0


def differences(ref, others):
    """How the OTHERS runs differ from REF: (the differences, the line's
    summary of them)."""
    diffs, reordered, renumbered = [], [], []
    for r in others:
        if r.rc != ref.rc:
            diffs.append('%s exit %s vs base exit %s' % (r.label, r.rc, ref.rc))
        d = first_difference(ref.lines, r.lines)
        if d and ref.tap and r.tap and blocks(ref.lines) == blocks(r.lines):
            reordered.append(r.label)
        elif d and unnumbered(ref.lines) == unnumbered(r.lines):
            renumbered.append(r.label)
        elif d:
            diffs.append('%s line %d: %r vs base %r' % (r.label, d[0] + 1, d[2], d[1]))
    if diffs:
        same = 'DIFFERENT: ' + '; '.join(diffs)
    else:
        same = 'same results in all 4 runs'
        notes = (['order differs in %s' % ', '.join(reordered)] if reordered else []) + \
            (['numbers in names differ in %s' % ', '.join(renumbered)] if renumbered else [])
        if notes:
            same += ' (%s)' % '; '.join(notes)
    return diffs, same


def explain(ref, expected):
    """Why the base run REF failed: its first difference from .result, its
    `not ok` lines, its last stderr line."""
    if expected is not None:
        d = first_difference(expected, [x.rstrip() for x in ref.stdout.splitlines()])
        if d:
            print('    base vs .result line %d: %r, expected %r' % (d[0] + 1, d[2], d[1]))
    for line in ref.lines:
        if ref.tap and line.lstrip().startswith('not ok'):
            print('    base: %s' % line.strip())
    last = ref.stderr.strip().splitlines()[-1:]
    if last:
        print('    base stderr: %s' % last[0][:200])

if __name__ == '__main__':
    sys.exit(main())
