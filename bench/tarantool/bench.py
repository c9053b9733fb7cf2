#!/usr/bin/env python3
"""Benchmark: the demo's replace/select loop on tarantool vs tarantool-base.

Runs examples/tarantool/app.lua in loop mode (LJPERF_APP_MODE=loop: one
fiber doing replace/select/update batches for --seconds, printing
"ljperf-loop: N ops/s", where N = replace+select operations per CPU second
spent in the loop) for four variants, alternating them run by run:

  base          tarantool-base, LUAJIT_PERF unset
  base+PERF     tarantool-base, LUAJIT_PERF=1 (ignored by the base binary)
  patched       tarantool,      LUAJIT_PERF unset
  patched+PERF  tarantool,      LUAJIT_PERF=1

Reports the best (and median) rate of each variant and the ratios of the
best rates to base. Not a test: on a shared machine take the numbers as a
first reading; use more --runs for anything you want to quote.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

RATE = re.compile(r'^ljperf-loop: ([0-9.]+) ops/s', re.M)


def run_once(binary, app, perf, seconds, jit):
    work = tempfile.mkdtemp(prefix='ljperf-bench-')
    try:
        env = dict(os.environ)
        for var in ('LUAJIT_PERF', 'LUAJIT_PERF_DIR'):
            env.pop(var, None)
        env.update({'LJPERF_APP_MODE': 'loop', 'LJPERF_APP_SECONDS': str(seconds),
                    'TMPDIR': work})
        if not jit:
            env['LJPERF_APP_JIT'] = 'off'
        if perf:
            env['LUAJIT_PERF'] = '1'
            env['LUAJIT_PERF_DIR'] = work
        proc = subprocess.Popen([binary, app], cwd=work, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(timeout=seconds * 10 + 60)
        # The emitter's map file has a fixed path: remove ours.
        try:
            os.unlink('/tmp/perf-%d.map' % proc.pid)
        except OSError:
            pass
        m = RATE.search(out.decode('utf-8', 'replace'))
        if proc.returncode != 0 or not m:
            raise RuntimeError('%s failed (exit %s): %s%s' % (
                binary, proc.returncode, out.decode('utf-8', 'replace'),
                err.decode('utf-8', 'replace')[-1000:]))
        return float(m.group(1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build-dir', default=os.path.join(root, 'build'),
                    help='build directory holding bin/tarantool and bin/tarantool-base')
    ap.add_argument('--tarantool', help='patched binary (default BUILD_DIR/bin/tarantool)')
    ap.add_argument('--tarantool-base', help='base binary (default BUILD_DIR/bin/tarantool-base)')
    ap.add_argument('--app', default=os.path.join(root, 'examples', 'tarantool', 'app.lua'))
    ap.add_argument('--runs', type=int, default=5, help='runs per variant (>= 5 recommended)')
    ap.add_argument('--seconds', type=float, default=2.0, help='loop duration per run')
    ap.add_argument('--jit-off', action='store_true', help='run the app with the JIT off')
    args = ap.parse_args()

    patched = os.path.abspath(args.tarantool or os.path.join(args.build_dir, 'bin', 'tarantool'))
    base = os.path.abspath(args.tarantool_base or
                           os.path.join(args.build_dir, 'bin', 'tarantool-base'))
    for b in (patched, base):
        if not os.access(b, os.X_OK):
            print('not an executable: %s' % b, file=sys.stderr)
            return 2
    app = os.path.abspath(args.app)
    variants = [('base', base, False), ('base+PERF', base, True),
                ('patched', patched, False), ('patched+PERF', patched, True)]
    rates = {name: [] for name, _, _ in variants}
    print('%d runs x %d variants, %.1f s each, jit %s'
          % (args.runs, len(variants), args.seconds, 'off' if args.jit_off else 'on'))
    for i in range(args.runs):
        # Alternate the order too, so that drifting machine load hits all.
        order = variants if i % 2 == 0 else list(reversed(variants))
        line = []
        for name, binary, perf in order:
            r = run_once(binary, app, perf, args.seconds, not args.jit_off)
            rates[name].append(r)
            line.append('%s %.0f' % (name, r))
        print('run %d: %s' % (i + 1, ', '.join(line)))
        sys.stdout.flush()

    best_base = max(rates['base'])
    print()
    print('%-13s %12s %12s %10s' % ('variant', 'best ops/s', 'median', 'best/base'))
    for name, _, _ in variants:
        best = max(rates[name])
        print('%-13s %12.0f %12.0f %10.3f'
              % (name, best, statistics.median(rates[name]), best / best_base))
    return 0


if __name__ == '__main__':
    sys.exit(main())
