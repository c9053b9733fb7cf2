#!/usr/bin/env python3
"""End-to-end perf test for Tarantool: call chains reach their roots.

For each binary (tarantool-base, then tarantool) it runs, in a fresh
temporary directory DIR (also TMPDIR of the app and LUAJIT_PERF_DIR):

  LUAJIT_PERF=1 perf --buildid-dir DIR/.debug record -k mono -g \\
      --call-graph fp --user-regs=bx -o DIR/perf.data BINARY app.lua
  perf --buildid-dir DIR/.debug inject --jit -i DIR/perf.data -o DIR/perf.jit.data
  perf --buildid-dir DIR/.debug script -i DIR/perf.jit.data \\
      -F comm,pid,tid,time,period,ip,sym,symoff,dso,uregs

and measures which share of the user-space samples (samples whose ip is in
user space) have a frame-pointer call chain that reaches a root: `main`, a
fiber start (`fiber_loop`, called by libcoro's `coro_init` trampoline) or a
Tarantool thread start (`cord_thread_func`, libeio's `etp_proc`).

Asserts that the share is >= --min-share (default 99%) on the patched
tarantool. --scope own restricts the count to samples whose leaf is not in
a system library (/usr, /lib: glibc, ld.so, ICU, OpenSSL are built without
frame pointers, so a sample taken inside them may lose its chain whatever
the VM does); the default, --scope all, counts every user-space sample. tarantool-base is measured for comparison only.

Exit status: 0 pass, 1 fail (also when perf is not installed).
Removes DIR and /tmp/perf-PID.map of the traced process unless --keep.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOTS = {
    'main': 'main',
    'fiber_loop': 'fiber start',
    'coro_init': 'fiber start',
    'cord_thread_func': 'thread start',
    'etp_proc': 'thread start',
}
FIELDS = 'comm,pid,tid,time,period,ip,sym,symoff,dso,uregs'
HEADER = re.compile(r'^(?P<comm>.*?)\s+(?P<pid>\d+)/(?P<tid>\d+)\s+(?P<time>[\d.]+):\s*(?P<period>\d+)?')
FRAME = re.compile(r'^\s+(?P<addr>[0-9a-f]+)\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)$')
SYMOFF = re.compile(r'\+0x[0-9a-f]+$')


class Sample:
    __slots__ = ('comm', 'pid', 'tid', 'period', 'frames')

    def __init__(self, comm, pid, tid, period):
        self.comm, self.pid, self.tid, self.period = comm, pid, tid, period
        self.frames = []          # (addr, sym, dso), leaf first


def parse_script(path):
    samples = []
    cur = None
    with open(path, encoding='utf-8', errors='replace') as f:
        for line in f:
            line = line.rstrip('\n')
            if not line or line.startswith(' ABI:'):
                continue
            if line[0] in ' \t':
                m = FRAME.match(line)
                if m and cur is not None:
                    cur.frames.append((int(m.group('addr'), 16),
                                       SYMOFF.sub('', m.group('sym')), m.group('dso')))
                continue
            m = HEADER.match(line)
            if m:
                cur = Sample(m.group('comm'), int(m.group('pid')), int(m.group('tid')),
                             int(m.group('period') or 1))
                samples.append(cur)
    return samples


def is_system(frame):
    dso = frame[2]
    return dso.startswith('/usr/') or dso.startswith('/lib')


def is_kernel(frame):
    addr, _, dso = frame
    return dso.startswith('[kernel') or addr >= 0xffff800000000000


def analyse(samples):
    """Returns a dict of counts over user-space samples."""
    res = {'samples': len(samples), 'user': 0, 'reached': 0, 'tx_user': 0, 'tx_reached': 0,
           'own': 0, 'own_reached': 0,
           'roots': collections.Counter(), 'threads': collections.Counter(),
           'missed_leaf': collections.Counter(), 'missed_last': collections.Counter(),
           'missed_dso': collections.Counter(),
           'pids': set()}
    for s in samples:
        if not s.frames or is_kernel(s.frames[0]):
            continue
        res['pids'].add(s.pid)
        res['user'] += 1
        tx = s.tid == s.pid
        res['tx_user'] += tx
        res['threads'][s.comm] += 1
        own = not is_system(s.frames[0])
        res['own'] += own
        root = None
        for _, sym, _ in s.frames:
            if sym in ROOTS:
                root = sym
                break
        if root:
            res['reached'] += 1
            res['tx_reached'] += tx
            res['own_reached'] += own
            res['roots'][root] += 1
        else:
            res['missed_leaf'][s.frames[0][1]] += 1
            res['missed_dso'][os.path.basename(s.frames[0][2])] += 1
            res['missed_last'][s.frames[-1][1]] += 1
    return res


def pct(a, b):
    return 100.0 * a / b if b else 0.0


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def measure(perf, binary, app, seconds, keep):
    work = tempfile.mkdtemp(prefix='ljperf-e2e-')
    pids = set()
    try:
        env = dict(os.environ)
        env.update({'LUAJIT_PERF': '1', 'LUAJIT_PERF_DIR': work, 'TMPDIR': work,
                    'LJPERF_APP_SECONDS': str(seconds)})
        data = os.path.join(work, 'perf.data')
        jdata = os.path.join(work, 'perf.jit.data')
        bid = ['--buildid-dir', os.path.join(work, '.debug')]
        rec = run([perf] + bid + ['record', '-k', 'mono', '-g', '--call-graph', 'fp',
                                  '--user-regs=bx', '-o', data, binary, app],
                  cwd=work, env=env, stdin=subprocess.DEVNULL, timeout=300)
        out = rec.stdout.decode('utf-8', 'replace')
        err = rec.stderr.decode('utf-8', 'replace')
        if rec.returncode != 0 or 'ljperf demo:' not in out:
            raise RuntimeError('perf record of %s failed (exit %d):\n%s%s'
                               % (binary, rec.returncode, out, err[-2000:]))
        inj = run([perf] + bid + ['inject', '--jit', '-i', data, '-o', jdata],
                  cwd=work, timeout=300)
        if inj.returncode != 0:
            raise RuntimeError('perf inject --jit failed (exit %d): %s'
                               % (inj.returncode, inj.stderr.decode('utf-8', 'replace')[-2000:]))
        script = os.path.join(work, 'perf.script')
        with open(script, 'wb') as f:
            sc = subprocess.run([perf] + bid + ['script', '-i', jdata, '-F', FIELDS],
                                cwd=work, stdout=f, stderr=subprocess.PIPE, timeout=600)
        if sc.returncode != 0:
            raise RuntimeError('perf script failed (exit %d): %s'
                               % (sc.returncode, sc.stderr.decode('utf-8', 'replace')[-2000:]))
        res = analyse(parse_script(script))
        pids = res['pids']
        res['jitdumps'] = sorted(n for n in os.listdir(work) if n.startswith('jit-'))
        res['app'] = out
        res['dir'] = work
        return res
    finally:
        # The emitter writes /tmp/perf-PID.map (fixed path): remove ours.
        if not keep:
            for pid in pids:
                try:
                    os.unlink('/tmp/perf-%d.map' % pid)
                except OSError:
                    pass
            shutil.rmtree(work, ignore_errors=True)


def report(name, res):
    print('%-15s user-space samples %6d, reaching a root %6d = %6.2f%% '
          '(tx thread %d/%d = %.2f%%)'
          % (name, res['user'], res['reached'], pct(res['reached'], res['user']),
             res['tx_reached'], res['tx_user'], pct(res['tx_reached'], res['tx_user'])))
    print('%-15s leaf outside system libraries %6d, reaching a root %6d = %6.2f%%'
          % ('', res['own'], res['own_reached'], pct(res['own_reached'], res['own'])))
    roots = ', '.join('%s %d' % (k, v) for k, v in res['roots'].most_common())
    print('    roots: %s' % (roots or 'none'))
    print('    threads: %s' % ', '.join('%s %d' % kv for kv in res['threads'].most_common()))
    print('    jitdump files: %s' % (', '.join(res['jitdumps']) or 'none'))
    if res['missed_leaf']:
        print('    not reaching, by leaf DSO: %s' % ', '.join(
            '%s %d' % kv for kv in res['missed_dso'].most_common(6)))
        print('    not reaching, top leaf functions: %s' % ', '.join(
            '%s %d' % kv for kv in res['missed_leaf'].most_common(6)))
        print('    not reaching, top outermost frames: %s' % ', '.join(
            '%s %d' % kv for kv in res['missed_last'].most_common(4)))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--tarantool', required=True, help='patched tarantool binary')
    ap.add_argument('--tarantool-base', help='unpatched tarantool binary (for comparison)')
    ap.add_argument('--app', default=os.path.join(here, '..', '..', 'examples', 'tarantool', 'app.lua'))
    ap.add_argument('--perf', default=shutil.which('perf') or 'perf')
    ap.add_argument('--seconds', type=float, default=3.0, help='run time of the demo app')
    ap.add_argument('--min-share', type=float, default=99.0,
                    help='required share (%%) of user-space samples reaching a root')
    ap.add_argument('--min-samples', type=int, default=500)
    ap.add_argument('--scope', choices=('all', 'own'), default='all',
                    help='samples counted for --min-share: all user-space ones, or those '
                         'whose leaf is outside system libraries')
    ap.add_argument('--keep', action='store_true', help='keep the temporary directories')
    args = ap.parse_args()

    if not shutil.which(args.perf):
        print('FAIL: perf not found (apt-get install linux-perf)')
        return 1
    app = os.path.abspath(args.app)
    todo = []
    if args.tarantool_base:
        todo.append(('tarantool-base', os.path.abspath(args.tarantool_base)))
    todo.append(('tarantool', os.path.abspath(args.tarantool)))
    results = {}
    for name, binary in todo:
        if not os.access(binary, os.X_OK):
            print('FAIL: not an executable: %s' % binary)
            return 1
        try:
            results[name] = measure(args.perf, binary, app, args.seconds, args.keep)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print('FAIL: %s' % e)
            return 1
        report(name, results[name])
        if args.keep:
            print('    kept: %s' % results[name]['dir'])
        sys.stdout.flush()

    res = results['tarantool']
    if args.scope == 'all':
        n, reached, what = res['user'], res['reached'], 'user-space samples'
    else:
        n, reached, what = res['own'], res['own_reached'], \
            'user-space samples with a leaf outside system libraries'
    share = pct(reached, n)
    if n < args.min_samples:
        print('FAIL: only %d %s on tarantool (need %d)' % (n, what, args.min_samples))
        return 1
    if share < args.min_share:
        print('FAIL: %.2f%% of tarantool\'s %s reach main or a fiber/thread start, '
              'need >= %.2f%%' % (share, what, args.min_share))
        return 1
    print('PASS: %.2f%% of tarantool\'s %s reach main or a fiber/thread start' % (share, what))
    return 0


if __name__ == '__main__':
    sys.exit(main())
