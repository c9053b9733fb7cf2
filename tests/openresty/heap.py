#!/usr/bin/env python3
"""Heap snapshots of nginx: `ljperf heap --nginx MASTER -o DIR` on
build/bin/nginx serving examples/openresty, started WITHOUT LUAJIT_PERF
(the remote switch asks for the snapshots), 2 workers, under wrk
(examples/openresty/load.lua) on loopback.

Checked:
rounds  three times `ljperf heap --nginx MASTER -o DIR/N`, while one wrk
        runs through all three and a thread sends identity.py's REQUESTS
        again and again: each exits 0; DIR/N holds heap-W.heapsnapshot for
        each worker W and nothing else; each loads (ljperf.heapsnap) and is
        that worker's heap (it has app.lua's functions); stderr has each
        one's summary. wrk: no socket error, no response but 2xx or 3xx;
        every response the thread got is the reference's (status, headers
        but Date, body: identity.responses before the rounds).
killed  `ljperf heap --nginx MASTER -o DIR` SIGKILLed as soon as it has
        asked the first worker (its control block's seq moved), under
        wrk: DIR and the workers' /tmp hold complete
        snapshots only (each loads, no .tmp; those in /tmp are removed);
        within --off-wait s every worker's control block is off again
        (nremote 0, ack == seq).
after   the same workers (none died or was replaced) answer REQUESTS
        exactly as before; wrk runs --before s again.
nginx is stopped, its prefix and the test's files removed. wrk missing
or nginx not starting is a failure. Prints requests/s before, during and
after, and how long each ljperf heap took.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
from examples.openresty import serve
from tests.lib import ljptest
import identity
import luaapp
import remote  # wrk, wrk_stats

APP = "examples/openresty/app.lua"


class Requests(threading.Thread):
    """identity.responses(NGX) again and again until stop(); counts the
    passes that differ from REF."""

    def __init__(self, ngx, ref):
        super().__init__(daemon=True)
        self.ngx, self.ref = ngx, ref
        self.passes = self.differ = 0
        self.first_diff = None
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            got = identity.responses(self.ngx)
            self.passes += 1
            if got != self.ref:
                self.differ += 1
                if self.first_diff is None:
                    self.first_diff = next((a, b) for a, b in zip(got, self.ref) if a != b)

    def stop(self):
        self.halt.set()
        self.join()


def ljperf_heap(opts, master, out):
    return subprocess.Popen([sys.executable, opts.ljperf, "heap", "--nginx", str(master),
                             "-o", out], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def rounds(opts, ngx, workers, ref, tmp):
    """Three ljperf heap --nginx under load; returns (ok, requests/s)."""
    secs = []
    ok = True
    load = remote.wrk(ngx.url, opts.seconds)
    req = Requests(ngx, ref)
    req.start()
    try:
        for n in range(1, 4):
            out = os.path.join(tmp, str(n))
            lj = ljperf_heap(opts, ngx.master, out)
            err, took = ljptest.timed_stderr(lj)
            secs.append(took)
            want = sorted("heap-%d.heapsnapshot" % w for w in workers)
            got = sorted(os.listdir(out)) if os.path.isdir(out) else []
            ok = ljptest.report(lj.returncode == 0 and got == want,
                                "round %d: ljperf heap --nginx %d exits %d, wrote %s"
                                % (n, ngx.master, lj.returncode, got)) and ok
            ok = ljptest.report(all(ljptest.has_function(ljptest.load_snapshot(
                os.path.join(out, f)), APP) for f in got) and
                                err.count("top 10 retainers") == len(workers),
                                "round %d: each loads, is a worker's heap (%s functions), "
                                "and has its summary on stderr" % (n, APP)) and ok
            if lj.returncode != 0:
                print(err.strip()[-2000:])
    finally:
        req.stop()
        load.send_signal(signal.SIGINT)     # wrk stops and prints its summary
        requests, rps, failed = remote.wrk_stats(load, 60)
    ok = ljptest.report(requests > 0 and not failed,
                        "wrk through the three rounds: %d requests, %s"
                        % (requests, failed or "none failed")) and ok
    ok = ljptest.report(req.passes > 0 and req.differ == 0,
                        "%d passes of %d requests meanwhile, every response as before "
                        "(%s)" % (req.passes, 2 * len(identity.REQUESTS),
                                  req.first_diff or "none differ")) and ok
    print("ljperf heap --nginx took %s s" % ", ".join("%.1f" % s for s in secs))
    return ok, rps


def killed(opts, ngx, workers, tmp):
    """ljperf heap --nginx SIGKILLed while it asks."""
    out = os.path.join(tmp, "killed")
    load = remote.wrk(ngx.url, int(opts.off_wait) + 60)
    try:
        asked = ljptest.kill_when_asked(ljperf_heap(opts, ngx.master, out), workers[0])
        off = ljptest.wait_for(lambda: all(ljptest.is_off(w) for w in workers),
                               opts.off_wait)
    finally:
        load.send_signal(signal.SIGINT)
        remote.wrk_stats(load, 60)
    return ljptest.report_heap_kill(out, workers, asked, off, opts.off_wait, "every worker is")


def run(opts):
    tmp = tempfile.mkdtemp(prefix="ljperf-or-heap-")
    ngx = luaapp.without_perf_env(serve.Nginx(opts.nginx, workers=2, perf_env=False))
    pids = []
    try:
        workers, pids, ok = luaapp.start_workers(ngx)
        before = remote.wrk_result(remote.wrk(ngx.url, opts.before), opts.before + 60)
        ref = identity.responses(ngx)
        good, during = rounds(opts, ngx, workers, ref, tmp)
        ok = good and ok
        ok = killed(opts, ngx, workers, tmp) and ok
        if ngx.proc.poll() is not None:
            ljptest.fail("nginx exited: " + ngx.errors())
        ok = ljptest.report(ngx.worker_pids() == workers,
                            "the same workers serve on (%s)" % ngx.worker_pids()) and ok
        ok = ljptest.report(identity.responses(ngx) == ref,
                            "they answer %d requests exactly as before"
                            % (2 * len(identity.REQUESTS))) and ok
        after = remote.wrk_result(remote.wrk(ngx.url, opts.before), opts.before + 60)
        print("RATE nginx: requests/s before %.0f, during the snapshots %.0f, after %.0f"
              % (before, during, after))
        return ok
    finally:
        ngx.stop()
        ljptest.remove_tmp_files(pids)
        ljptest.remove_heap_files(pids)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nginx", required=True)
    p.add_argument("--ljperf", required=True)
    p.add_argument("--seconds", type=int, default=120,
                   help="wrk's time at most: it is stopped after the three rounds")
    p.add_argument("--before", type=int, default=2, help="wrk time before and after")
    p.add_argument("--off-wait", type=float, default=10.0,
                   help="seconds the workers get to be off after ljperf is killed")
    o = p.parse_args()
    if not shutil.which("wrk"):
        ljptest.fail("wrk is not installed (.ci/openresty-packages)")
    return run(o)


if __name__ == "__main__":
    ljptest.main(main)
