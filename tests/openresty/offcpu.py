#!/usr/bin/env python3
"""Off-CPU profile of nginx under wrk: `ljperf record --off-cpu --lines
--nginx MASTER` on build/bin/nginx (2 workers) serving
tests/openresty/blocky.lua on loopback: /block (M.block blocks the worker
in ffi.C.usleep, 2 ms) and /compute, /hash (compute, never block), each
under its own wrk for the first LOADED of the SECONDS recorded, and a
trickle of one /hash request every 0.1 s throughout (so that the workers'
waits in epoll_wait end inside the recording once wrk is done).

Checked:
record   ljperf exits 0, offcpu.folded, offcpu.html and offcpu.pb.gz are
         written; no request failed (wrk: non-2xx or socket errors; the
         trickle's).
blocking the issue's ">= 95% of non-idle off-CPU time under the blocking
         handler's Lua frame, with its line": of the workers' non-idle
         off-CPU time under the handlers' Lua frames ([blocked] and
         [preempted]), >= 95% under M.block's frame (name and definition
         line found in blocky.lua), and >= 95% of all [blocked] time at
         its usleep call's line (the JIT calls usleep from a trace that
         inlined M.block: vm_patch 0007 keeps it and its line). The
         denominator leaves out the [preempted] time in nginx's own C code
         (no Lua frame: the event loop, parsing, writes): it is the workers
         waiting for a CPU that wrk and the machine's other load hold, no
         handler's doing (M.block held 90.9-96.9% of all non-idle time over
         4 runs, 98.1-99.5% of the handlers': printed, with the time per
         handler).
idle     [idle] holds >= 1 s of the workers' waiting in epoll_wait under
         ngx_process_events_and_timers, no Lua frame in any [idle] stack;
         offcpu.html leaves it out.
Prints the seconds per kind and handler. nginx is stopped, its prefix and
the workers' /tmp files removed. perf or wrk missing, or nginx not
starting, is a failure.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
import luaapp
from tests.lib import ljptest

APP = os.path.join(HERE, "blocky.lua")
MIN_SHARE = 0.95
SECONDS = 6             # recorded; wrk loads the first LOADED of them (less ljperf's start)
LOADED = 4
TRICKLE = 0.1           # seconds between the trickle's requests
MIN_IDLE = 1e9          # ns of [idle] the unloaded seconds give at least


class BlockyNginx(luaapp.LuaAppNginx):
    """serve.Nginx with blocky.lua's three locations instead of the example's."""
    LOCATIONS = """\
        location = /block { content_by_lua_block { require("blocky").block() } }
        location = /compute { content_by_lua_block { require("blocky").compute() } }
        location = /hash { content_by_lua_block { require("blocky").hash() } }
"""
    PROBE = "/hash"
    APPDIR = HERE


def app_lines():
    """(M.block's definition line, its usleep line) in blocky.lua."""
    defn = call = None
    with open(APP) as f:
        for i, line in enumerate(f, 1):
            if line.startswith("function M.block("):
                defn = i
            elif "ffi.C.usleep(" in line:
                call = i
    if not (defn and call):
        ljptest.fail("blocky.lua: M.block and its usleep call not found")
    return defn, call


def wrk(url, seconds, conns):
    return subprocess.Popen(["wrk", "-t1", "-c%d" % conns, "-d%ds" % seconds, url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wrk_ok(p, name):
    """wrk's requests and whether none failed."""
    out, _ = p.communicate(timeout=120)
    m = re.search(r"(\d+) requests in", out)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
    n = int(m.group(1)) if m else 0
    print("wrk %s: %d requests%s" % (name, n, "; " + bad.group(0) if bad else ""))
    return n > 0 and bad is None


class Trickle(threading.Thread):
    """GET PATH every TRICKLE seconds until stop(): with wrk done, each ends
    a worker's wait in epoll_wait inside the recording, so it is weighed."""

    def __init__(self, ngx, path):
        super().__init__(daemon=True)
        self.ngx, self.path = ngx, path
        self.done = self.failed = 0
        self.halt = threading.Event()

    def run(self):
        while not self.halt.wait(TRICKLE):
            try:
                ok = self.ngx.get(self.path, key=None)[0] == 200
            except OSError:
                ok = False
            self.done += ok
            self.failed += not ok

    def stop(self):
        self.halt.set()
        self.join()
        print("trickle %s: %d requests, %d failed" % (self.path, self.done, self.failed))
        return self.done > 0 and self.failed == 0


def run(opts):
    tmp = tempfile.mkdtemp(prefix="ljperf-or-offcpu-")
    ngx = luaapp.without_perf_env(BlockyNginx(opts.nginx, workers=2, perf_env=False))
    pids = []
    trickle = Trickle(ngx, "/hash")
    try:
        luaapp.start(ngx)
        workers = ngx.worker_pids()
        pids = [ngx.master] + workers
        out = os.path.join(tmp, "prof")
        trickle.start()
        loads = [(n, wrk(ngx.url + "/" + n, LOADED, c))
                 for n, c in (("block", 4), ("compute", 4), ("hash", 4))]
        args = ["record", "--off-cpu", "--lines", "--nginx", str(ngx.master),
                "--duration", str(SECONDS), "-o", out]
        lj = subprocess.run([sys.executable, opts.ljperf] + args, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=600)
        print("ljperf %s -> %d\n%s" % (" ".join(args), lj.returncode, lj.stderr.strip()[-2000:]))
        ok = ljptest.report(lj.returncode == 0, "ljperf record --off-cpu --nginx exits 0")
        for n, p in loads:
            ok = ljptest.report(wrk_ok(p, n), "no /%s request failed" % n) and ok
        ok = ljptest.report(trickle.stop(), "no request of the trickle failed") and ok
        if lj.returncode != 0:
            return False
        for f in ("offcpu.folded", "offcpu.html", "offcpu.pb.gz"):
            ok = ljptest.report(os.path.isfile(os.path.join(out, f)), "wrote " + f) and ok
        good = check(out, workers)
        if not good and opts.keep:
            shutil.copytree(out, opts.keep, dirs_exist_ok=True)
        return good and ok
    finally:
        trickle.halt.set()
        ngx.stop()
        ljptest.remove_tmp_files(pids)
        shutil.rmtree(tmp, ignore_errors=True)


def check(out, workers):
    defn, call = app_lines()
    frame = re.compile(r"^M\.block@%s:%d:(\d+|\?)(?:_\[j\])?$" % (re.escape(APP), defn))
    off = ljptest.folded(os.path.join(out, "offcpu.folded"))
    kinds = {}
    for k, w in off.items():
        lab = k.rpartition(";")[2]
        kinds[lab] = kinds.get(lab, 0) + w
    print("off-CPU: " + ", ".join("%s %.3f s" % (k, v / 1e9) for k, v in sorted(kinds.items())))
    blocked = {k: w for k, w in off.items() if k.endswith(";[blocked]")}
    total = sum(blocked.values())
    lines = {}
    for k, w in blocked.items():
        m = next((m for m in map(frame.match, k.split(";")) if m), None)
        if m:
            lines[m.group(1)] = lines.get(m.group(1), 0) + w
    # non-idle off-CPU time by handler (the first M.* frame), or none
    by = {}
    for k, w in off.items():
        if not k.endswith(";[idle]"):
            h = next((f.split("@", 1)[0] for f in k.split(";") if f.startswith("M.")), "")
            lab = k.rpartition(";")[2]
            by[h, lab] = by.get((h, lab), 0) + w
    handlers = sum(w for (h, _), w in by.items() if h)
    mine = sum(w for (h, _), w in by.items() if h == "M.block")
    print("non-idle off-CPU by handler: %s"
          % ", ".join("%s %s %.3f s" % (h or "(no Lua frame)", lab, w / 1e9)
                      for (h, lab), w in sorted(by.items())))
    print("M.block: %.1f%% of all the workers' non-idle off-CPU time, [preempted] in nginx's "
          "own C code included" % (100.0 * mine / max(sum(by.values()), 1)))
    print("M.block's [blocked] time by current line: %s"
          % ", ".join("%s %.3f s" % (k, v / 1e9) for k, v in sorted(lines.items())))
    ok = ljptest.report(handlers > 0 and mine >= MIN_SHARE * handlers,
                        "M.block@blocky.lua:%d holds %.1f%% of the non-idle off-CPU time under "
                        "the handlers' Lua frames, [blocked] and [preempted] (>= %d%%)"
                        % (defn, 100.0 * mine / max(handlers, 1), 100 * MIN_SHARE))
    at_call = lines.get(str(call), 0)
    ok = ljptest.report(total > 0 and at_call >= MIN_SHARE * total,
                        "its usleep call's line %d holds %.1f%% of all [blocked] time (>= %d%%)"
                        % (call, 100.0 * at_call / max(total, 1), 100 * MIN_SHARE)) and ok
    idle = {k: w for k, w in off.items() if k.endswith(";[idle]")}
    loop = sum(w for k, w in idle.items() if "ngx_process_events_and_timers" in k.split(";"))
    ok = ljptest.report(loop >= MIN_IDLE and all("@" not in k for k in idle),
                        "[idle]: %.3f s in the event loop (ngx_process_events_and_timers; "
                        ">= %.0f s), no Lua frame" % (loop / 1e9, MIN_IDLE / 1e9)) and ok
    with open(os.path.join(out, "offcpu.html"), encoding="utf-8") as f:
        ok = ljptest.report('"n":"[idle]"' not in f.read(),
                            "offcpu.html leaves [idle] out") and ok
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nginx", required=True)
    p.add_argument("--ljperf", required=True)
    p.add_argument("--keep", metavar="DIR", help="copy a failing recording to DIR")
    o = p.parse_args()
    ljptest.need_perf_and_wrk()
    return run(o)


if __name__ == "__main__":
    ljptest.main(main)
