#!/usr/bin/env python3
"""net.box round trips between two Tarantool instances, the server under
perf: the handler's Lua frames sit under the IPROTO request path.

    rpc.py --tarantool BIN [--client BIN] [--seconds S] [--keep]

The server is examples/tarantool/rpc/server.lua: on Tarantool 3 started by
its config (`BIN --name server --config examples/tarantool/rpc/config.yaml`,
port and app file from TT_IPROTO_LISTEN and TT_APP_FILE), on 2.x as a
script (LJPERF_RPC_LISTEN); 200 idle fibers tick beside it, and its
on_replace trigger is set through the trigger module on 3.x. It runs in a
scratch directory under

    LUAJIT_PERF=1 perf record -k mono -g --call-graph fp --user-regs=r13

while examples/tarantool/rpc/client.lua (on --client, default BIN, without
LUAJIT_PERF) calls ljperf_rpc_handle from 8 fibers over one net.box
connection on loopback for S seconds, checks every answer and ends the
server. Then perf inject --jit, perf script and lj_merge as in e2e_perf.py.

Asserted:
  client      exit 0: every call answered right, one trigger run per call.
  roots       >= 99% of the server's user-space samples whose leaf is not
              in a system library (no frame pointers there) reach main or
              a fiber/thread start (e2e_perf.ROOTS); >= 300 such samples.
  handler     the stacks holding ljperf_rpc_handle (>= 5% of the weight):
              >= 99% of their weight reads, outermost first,
                fiber_loop ... tx_process_call ... box_process_call ...
                box_lua_call ... execute_lua_call; handle; route x5;
                store|score [; lbox_replace ... box_replace ...; audit]
              (the C frames in that order before the first Lua frame, that
              frame the handler, the Lua frames the handler's calls in
              order, as e2e_perf.chain_ok judges them with traces; box C
              frames under store only, in order). Full chains handle ... store;
              lbox_replace ... box_replace ... memtx_*|txn_* >= 1% of it.
  trigger     the audit trigger's stacks (>= 1 sample) run under store's
              lbox_replace and box_replace, >= 99% of their weight.
  controls    each check fails on wrong expectations: the request path
              reversed, the handler below store, the trigger called by the
              handler itself.
Files go to a temporary directory (perf --buildid-dir inside), removed with
the server's /tmp/perf-PID.map unless --keep. Exit 0 on success, 1 on a
failed check or a run that did not work.
"""

import argparse
import copy
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RPC = os.path.join(ROOT, 'examples', 'tarantool', 'rpc')
import e2e_perf as E  # the one perf pipeline and folded reader

MIN_SAMPLES = 300
MIN_HANDLER = 5.0       # % of all weight in handler stacks (start-up included)
MIN_FULL = 1.0          # % of the handler weight on full chains down to memtx/txn
ROUTE = ['rpc_route'] * 5
EXPECT = {
    'path': ['fiber_loop', 'tx_process_call', 'box_process_call', 'box_lua_call',
             'execute_lua_call'],
    'chains': (['rpc_handle'] + ROUTE + ['rpc_store', 'rpc_audit'],
               ['rpc_handle'] + ROUTE + ['rpc_score']),
    'box_under': 'rpc_store',
    'box': ['lbox_replace', 'box_replace'],
    'deep': r'^(memtx_|txn_)',
}
FUNCS = ('rpc_handle', 'rpc_route', 'rpc_store', 'rpc_score', 'rpc_audit', 'rpc_idle')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def in_order(names, want):
    """Index after the last of WANT found in NAMES in order, or None."""
    i = 0
    for w in want:
        while i < len(names) and names[i] != w:
            i += 1
        if i == len(names):
            return None
        i += 1
    return i


def box_entry(frames, exp):
    """Index of the box C API's entry (exp['box'][0]) when it is called by
    exp['box_under'] (or a trace) and the box frames below it come in
    exp['box']'s order (a sample may stop before the last); else None."""
    b = next((i for i, f in enumerate(frames) if f.name == exp['box'][0]), None)
    if b is None or not (frames[b - 1].trace or frames[b - 1].fid == exp['box_under']):
        return None
    seen = [f.name for f in frames[b:] if f.name in exp['box']]
    return b if seen == exp['box'][:len(seen)] else None


def check_handler(stacks, names, exp):
    r = E.Result('handler under IPROTO')
    total = sum(w for _, w in stacks)
    wh = valid = full = 0
    for frames, w in stacks:
        if not any(f.fid == 'rpc_handle' for f in frames):
            continue
        wh += w
        k = next(i for i, f in enumerate(frames) if f.lua)
        # server.lua's frames; Tarantool's own Lua (tuple.__index under
        # store, msgpackffi) may sit between or below them.
        lua = [f for f in frames if f.lua and (f.trace or names.is_app(f.fid))]
        ok = (in_order([f.name for f in frames[:k]], exp['path']) is not None
              and lua[0].fid == 'rpc_handle'
              and any(E.chain_ok(lua, c, names, prefix=True) for c in exp['chains']))
        # The box C API: called by store (or a trace), its frames in order.
        deep = False
        if ok and any(f.name == exp['box'][0] for f in frames):
            b = box_entry(frames, exp)
            ok = b is not None
            rest = [f.name for f in frames[b:]] if ok else []
            deep = in_order(rest, exp['box']) is not None and \
                any(re.match(exp['deep'], n) for n in rest)
        if ok:
            valid += w
            full += w if deep else 0
        else:
            r.example(frames, w)
    r.lines.append('handler stacks %.1f%% of all weight; %.2f%% of them under %s in order; '
                   'full chains to memtx/txn %.2f%%' % (E.pct(wh, total), E.pct(valid, wh),
                                                       ';'.join(exp['path']), E.pct(full, wh)))
    r.need(E.pct(wh, total) >= MIN_HANDLER, 'handler stacks %.1f%% of the weight < %.0f%%'
           % (E.pct(wh, total), MIN_HANDLER))
    r.need(E.pct(valid, wh) >= E.MIN_VALID, '%.2f%% in order < %.0f%%'
           % (E.pct(valid, wh), E.MIN_VALID))
    r.need(E.pct(full, wh) >= MIN_FULL, 'full chains %.2f%% < %.1f%%' % (E.pct(full, wh), MIN_FULL))
    return r


def check_trigger(stacks, names, exp):
    r = E.Result('trigger under box_replace')
    wt = valid = 0
    for frames, w in stacks:
        i = next((i for i, f in enumerate(frames) if f.fid == 'rpc_audit'), None)
        if i is None:
            continue
        wt += w
        b = box_entry(frames, exp)
        ok = b is not None and b < i and \
            in_order([f.name for f in frames[b:i]], exp['box']) is not None
        if ok:
            valid += w
        else:
            r.example(frames, w)
    r.lines.append('trigger stacks weight %d; %.2f%% under %s;%s' % (
        wt, E.pct(valid, wt), exp['box_under'], ';'.join(exp['box'])))
    r.need(wt > 0, 'no sample in the trigger')
    r.need(E.pct(valid, wt) >= E.MIN_VALID, '%.2f%% in order < %.0f%%'
           % (E.pct(valid, wt), E.MIN_VALID))
    return r


CHECKS = (check_handler, check_trigger)


def controls():
    out = []
    e = copy.deepcopy(EXPECT)
    e['path'] = list(reversed(e['path']))
    out.append(('request path reversed', check_handler, e))
    e = copy.deepcopy(EXPECT)
    e['chains'] = (['rpc_store', 'rpc_handle'] + ROUTE,)
    out.append(('handler below store', check_handler, e))
    e = copy.deepcopy(EXPECT)
    e['box_under'] = 'rpc_handle'
    out.append(('trigger called by the handler itself', check_trigger, e))
    return out


def record(args, work, version):
    port = free_port()
    env = dict(os.environ, LUAJIT_PERF='1', LUAJIT_PERF_DIR=work, TMPDIR=work)
    server = os.path.join(RPC, 'server.lua')
    if version >= (3, 0):
        cmd = [args.tarantool, '--name', 'server', '--config', os.path.join(RPC, 'config.yaml')]
        env.update(TT_IPROTO_LISTEN=json.dumps([{'uri': '127.0.0.1:%d' % port}]),
                   TT_APP_FILE=server)
    else:
        cmd = [args.tarantool, server]
        env.update(LJPERF_RPC_LISTEN='127.0.0.1:%d' % port)
    data = os.path.join(work, 'perf.data')
    perf = subprocess.Popen(
        [args.perf, '--buildid-dir', os.path.join(work, '.debug'), 'record', '--no-bpf-event',
         '-k', 'mono', '-g', '--call-graph', 'fp', '--user-regs=r13', '-o', data, '--'] + cmd,
        cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True)
    try:
        cenv = {k: v for k, v in os.environ.items() if not k.startswith('LUAJIT_PERF')}
        client = subprocess.run([args.client, os.path.join(RPC, 'client.lua'),
                                 '127.0.0.1:%d' % port, str(args.seconds), '8'],
                                cwd=work, env=dict(cenv, TMPDIR=work), capture_output=True,
                                text=True, timeout=args.seconds + 60)
        out, _ = perf.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(perf.pid, signal.SIGKILL)
        perf.wait()
        raise RuntimeError('the client or the server did not end in time')
    finally:
        if perf.poll() is None:
            os.killpg(perf.pid, signal.SIGKILL)
            perf.wait()
    out = out.decode('utf-8', 'replace')
    if perf.returncode != 0 or 'ljperf rpc server: ready' not in out:
        raise RuntimeError('perf record of the server failed (exit %d):\n%s'
                           % (perf.returncode, out[-3000:]))
    return data, client


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--tarantool', required=True, help='patched tarantool (the server)')
    ap.add_argument('--client', help='tarantool for the client (default: --tarantool)')
    ap.add_argument('--perf', default=shutil.which('perf') or 'perf')
    ap.add_argument('--lj-merge', default=os.environ.get('LJ_MERGE') or
                    os.path.join(ROOT, 'perf-script', 'lj_merge.py'))
    ap.add_argument('--seconds', type=float, default=3.0, help='how long the client calls')
    ap.add_argument('--keep', action='store_true', help='keep the temporary directory')
    args = ap.parse_args()
    args.tarantool = os.path.abspath(args.tarantool)
    args.client = os.path.abspath(args.client or args.tarantool)
    if not shutil.which(args.perf):
        print('FAIL: perf not found (apt-get install linux-perf)')
        return 1
    version = E.tarantool_version(args.tarantool)
    if version is None:
        print('FAIL: cannot tell the version of %s' % args.tarantool)
        return 1
    print('Tarantool %d.%d, server started %s' % (version + (
        'by its config (--name server --config)' if version >= (3, 0) else 'as a script',)))
    names = E.Names(os.path.join(RPC, 'server.lua'), required=FUNCS)
    work = tempfile.mkdtemp(prefix='ljperf-rpc-')
    pids = set()
    try:
        data, client = record(args, work, version)
        pids |= E.ljptest.dump_pids(work)
        print(client.stdout.strip())
        verdicts = [(client.returncode == 0, 'client: exit %d %s%s' % (
            client.returncode, client.stdout.strip(), client.stderr.strip()[-1000:]))]
        res = E.fold_recording(args.perf, args.lj_merge, work, data, names)
        pids |= res['pids']
        E.report('server', res)
        ok = res['own'] >= MIN_SAMPLES and E.pct(res['own_reached'], res['own']) >= 99.0
        msg = '%.2f%% of %d samples with a leaf outside system libraries reach a root' % (
            E.pct(res['own_reached'], res['own']), res['own'])
        print('  %s roots: %s' % ('ok  ' if ok else 'BAD ', msg))
        verdicts.append((ok, 'roots: ' + msg))
        for fn in CHECKS:
            r = fn(res['stacks'], names, EXPECT)
            print('  %s %s: %s' % ('ok  ' if r.ok else 'BAD ', r.name, r.lines[0]))
            for p in r.problems:
                print('         problem: ' + p)
            for ex in r.examples if not r.ok else []:
                print('         e.g. ' + ex)
            verdicts.append((r.ok, '%s: %s' % (r.name, '; '.join(r.problems) or r.lines[0])))
        for desc, fn, e in controls():
            r = fn(res['stacks'], names, e)
            print('  control (%s): %s' % (desc, 'fails, as it must' if not r.ok
                                          else 'PASSES: the check cannot fail'))
            verdicts.append((not r.ok, 'negative control (%s) passes' % desc))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print('FAIL: %s' % e)
        return 1
    finally:
        pids |= E.ljptest.dump_pids(work)
        if args.keep:
            print('kept: %s' % work)
        else:
            E.ljptest.remove_tmp_files(pids)
            shutil.rmtree(work, ignore_errors=True)
    bad = [m for ok, m in verdicts if not ok]
    for m in bad:
        print('FAIL: ' + m)
    if bad:
        return 1
    print('PASS: %d checks (client, roots, handler under IPROTO, trigger, negative controls)'
          % len(verdicts))
    return 0


if __name__ == '__main__':
    sys.exit(main())
