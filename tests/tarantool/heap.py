#!/usr/bin/env python3
"""Heap snapshots of Tarantool: `ljperf heap -p PID -o DIR` on the net.box
demo's server (examples/tarantool/rpc/server.lua, started as rpc.py starts
it, WITHOUT LUAJIT_PERF: the remote switch asks for the snapshots) while
client.lua calls it from 8 fibers over one net.box connection on loopback.

Checked:
rounds  three times `ljperf heap -p SERVER -o DIR/N` while the client
        calls: each exits 0 and writes DIR/N/heap-SERVER.heapsnapshot and
        nothing else, which loads (ljperf.heapsnap), is the server's heap
        (it has server.lua's functions) and has its summary on stderr.
killed  `ljperf heap -p SERVER -o DIR` SIGKILLed as soon as it has asked
        (the control block's seq moved): DIR and /tmp hold complete
        snapshots only (each loads; those in /tmp are removed); within
        --off-wait s the server is off again (nremote 0, ack == seq).
client  exit 0: every call answered right, one trigger run per call (0
        failed requests), and the server ends as the client asks.
The scratch directory and the server's /tmp files are removed; the server
is killed if it is still there. Prints the calls and each round's time.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RPC = os.path.join(ROOT, "examples", "tarantool", "rpc")
SERVER = os.path.join(RPC, "server.lua")
from tests.lib import ljptest
import e2e_perf  # tarantool_version
import rpc       # free_port

PERF_VARS = ("LUAJIT_PERF", "LUAJIT_PERF_DIR", "LUAJIT_PERF_REMOTE", "LUAJIT_PERF_MEMRATE")


def start_server(opts, work):
    """The demo's server, started as rpc.py starts it, once it listens:
    (process, port). Its output goes to WORK/server.out."""
    port = rpc.free_port()
    env = {k: v for k, v in os.environ.items() if k not in PERF_VARS}
    env["TMPDIR"] = work
    if e2e_perf.tarantool_version(opts.tarantool) >= (3, 0):
        cmd = [opts.tarantool, "--name", "server", "--config", os.path.join(RPC, "config.yaml")]
        env.update(TT_IPROTO_LISTEN=json.dumps([{"uri": "127.0.0.1:%d" % port}]),
                   TT_APP_FILE=SERVER)
    else:
        cmd = [opts.tarantool, SERVER]
        env["LJPERF_RPC_LISTEN"] = "127.0.0.1:%d" % port
    with open(os.path.join(work, "server.out"), "w") as log:
        p = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL,
                             stdout=log, stderr=subprocess.STDOUT)

    def listens():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return p.poll() is not None
    if not ljptest.wait_for(listens, 30) or p.poll() is not None:
        p.kill()
        p.wait()
        with open(os.path.join(work, "server.out")) as f:
            ljptest.fail("the server did not start: " + f.read()[-1000:])
    return p, port


def ljperf_heap(opts, pid, out):
    return subprocess.Popen([sys.executable, opts.ljperf, "heap", "-p", str(pid), "-o", out],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def rounds(opts, pid, tmp):
    ok = True
    secs = []
    for n in range(1, 4):
        out = os.path.join(tmp, str(n))
        lj = ljperf_heap(opts, pid, out)
        err, took = ljptest.timed_stderr(lj)
        secs.append(took)
        got = sorted(os.listdir(out)) if os.path.isdir(out) else []
        ok = ljptest.report(lj.returncode == 0 and got == ["heap-%d.heapsnapshot" % pid],
                            "round %d: ljperf heap -p %d exits %d, wrote %s"
                            % (n, pid, lj.returncode, got)) and ok
        if got:
            snap = ljptest.load_snapshot(os.path.join(out, got[0]))
            ok = ljptest.report(ljptest.has_function(snap, "rpc/server.lua") and
                                "top 10 retainers" in err,
                                "round %d: it loads, is the server's heap (%d objects, "
                                "server.lua's functions), its summary on stderr"
                                % (n, snap.n)) and ok
        if lj.returncode != 0:
            print(err.strip()[-2000:])
    print("ljperf heap -p took %s s" % ", ".join("%.1f" % s for s in secs))
    return ok


def killed(opts, pid, tmp):
    out = os.path.join(tmp, "killed")
    asked = ljptest.kill_when_asked(ljperf_heap(opts, pid, out), pid)
    off = ljptest.wait_for(lambda: ljptest.is_off(pid), opts.off_wait)
    return ljptest.report_heap_kill(out, [pid], asked, off, opts.off_wait, "the server is")


def run(opts):
    work = tempfile.mkdtemp(prefix="ljperf-tnt-heap-")
    server = None
    try:
        server, port = start_server(opts, work)
        client = subprocess.Popen([opts.tarantool, os.path.join(RPC, "client.lua"),
                                   "127.0.0.1:%d" % port, str(opts.seconds), "8"],
                                  cwd=work, env=dict(os.environ, TMPDIR=work),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)                 # the client connects and calls
        ok = rounds(opts, server.pid, work)
        ok = killed(opts, server.pid, work) and ok
        ok = ljptest.report(client.poll() is None, "the client still calls after them "
                            "(--seconds %d)" % opts.seconds) and ok
        out, err = client.communicate(timeout=opts.seconds + 60)
        print(out.strip())
        ok = ljptest.report(client.returncode == 0,
                            "client exit %d: every call answered right, one trigger run per "
                            "call %s" % (client.returncode, err.strip()[-500:])) and ok
        ok = ljptest.report(server.wait(timeout=30) == 0, "the server ends as the client "
                            "asks (exit %d)" % server.returncode) and ok
        return ok
    finally:
        if server is not None:
            if server.poll() is None:
                server.kill()
                server.wait()
            ljptest.remove_tmp_files([server.pid])
            ljptest.remove_heap_files([server.pid])
        shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tarantool", required=True, help="patched tarantool")
    p.add_argument("--ljperf", required=True)
    p.add_argument("--seconds", type=int, default=12,
                   help="how long the client calls (the snapshots take less)")
    p.add_argument("--off-wait", type=float, default=10.0,
                   help="seconds the server gets to be off after ljperf is killed")
    return run(p.parse_args())


if __name__ == "__main__":
    ljptest.main(main)
