#!/usr/bin/env python3
"""The remote switch on nginx: build/bin/nginx serving examples/openresty,
started WITHOUT LUAJIT_PERF (not in its environment, no `env LUAJIT_PERF`
directive), 2 workers, profiled by `ljperf record -p W1,W2` and then by
`ljperf record --nginx MASTER` (docs/remote-switch.md).

Before: each worker's control block says no state is switched on
(nremote 0) and there is no /tmp/perf-W.map nor /tmp/jit-W.dump; wrk runs
--before seconds (requests/s before). The responses to identity.py's
REQUESTS are taken as the reference.

Each recording (-p W1,W2, then --nginx MASTER): wrk on loopback for
--seconds + 5 s; ljperf starts with it (the workers switch at their next
GC step or trace exit: the load makes them run Lua) and records --seconds.
A thread polls the workers' control blocks: switch-on latency (ljperf
start -> nremote > 0). Checked on the recording, with e2e.py's checks:
roots (>= 99% of the worker samples whose leaf is outside frameless system
libraries reach main or ngx_worker_process_cycle) and the folded stacks
(content, access, log, timer, sleep, PCRE, cjson: app.lua's Lua frames
under nginx's phase handlers); app.lua's functions named as a start with
LUAJIT_PERF names them (M.api_content, render); plus app frames under
ngx_http_core_content_phase -> ngx_http_lua_content_handler (whose tail
calls leave ngx_http_lua_content_by_chunk as its frame). After ljperf ends, under 1 s
bursts of wrk (a worker switches at its next GC step or trace exit, so it
must run Lua): every worker's block shows our last request acknowledged
(ack == seq) and nremote 0 within --off-wait seconds: recording is off
again.

After: the same workers (none died or was replaced) answer REQUESTS
exactly as before; wrk runs --before seconds again (requests/s after); of
the files in /tmp named after nginx's pids only the workers'
perf-W.map, jit-W.dump and jit-W.dump.inline are left (docs/remote-switch.md, Files: while the
process runs). nginx is stopped and those files removed at the end.

perf or wrk missing is a failure. Prints requests/s before, during, after.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from examples.openresty import serve
from tests.lib import ljptest
from ljperf import remote as ljremote
import e2e
import identity
import luaapp

LOAD = os.path.join(ROOT, "examples", "openresty", "load.lua")


block_state, is_off, is_on = ljptest.block_state, ljptest.is_off, ljptest.is_on


def wrk(url, seconds):
    return subprocess.Popen(["wrk", "-t1", "-c8", "-d%ds" % seconds, "-s", LOAD, url],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wrk_stats(p, timeout):
    """(requests, requests/s, what failed: "" when nothing did) of the wrk
    process P, waited for; no requests fails the test."""
    out, _ = p.communicate(timeout=timeout)
    m = re.search(r"(\d+) requests in", out)
    rps = re.search(r"Requests/sec:\s*([\d.]+)", out)
    if not m or int(m.group(1)) == 0 or not rps:
        ljptest.fail("wrk made no requests: " + out[-500:])
    failed = [ln.strip() for ln in out.splitlines()
              if ln.strip().startswith(("Socket errors:", "Non-2xx or 3xx responses:"))]
    return int(m.group(1)), float(rps.group(1)), "; ".join(failed)


def wrk_result(p, timeout):
    return wrk_stats(p, timeout)[1]


def pid_files(pids):
    """Entries of /tmp whose name holds one of PIDS as a number."""
    rx = re.compile(r"(?:^|\D)(%s)(?:\D|$)" % "|".join(map(str, pids)))
    return sorted(f for f in os.listdir("/tmp") if rx.search(f))


class OnWatch:
    """Times from start() to each pid's control block saying switched on."""

    def __init__(self, pids):
        self.pids, self.t0, self.on = pids, None, {}
        self.stop = threading.Event()

    def start(self):
        self.t0 = time.monotonic()
        self.th = threading.Thread(target=self._run, daemon=True)
        self.th.start()

    def _run(self):
        while not self.stop.is_set() and len(self.on) < len(self.pids):
            for p in self.pids:
                if p not in self.on:
                    try:
                        if is_on(p):
                            self.on[p] = time.monotonic() - self.t0
                    except (OSError, ljremote.RemoteError):
                        pass
            time.sleep(0.01)

    def done(self):
        self.stop.set()
        self.th.join()
        return self.on


# nginx-lua's content handler chain: ngx_http_core_content_phase calls
# ngx_http_lua_content_handler, which ends with `return
# llcf->content_handler(r)` (ngx_http_lua_content_handler_inline for
# content_by_lua_block), which ends with `return
# ngx_http_lua_content_by_chunk(L, r)`: both are tail calls (jmp in the
# -O2 build), so while Lua runs only the last of them has a frame.
CONTENT_CHAIN = ("ngx_http_lua_content_handler", "ngx_http_lua_content_handler_inline",
                 "ngx_http_lua_content_by_chunk")


def app_under_content_handler(folded):
    """(weight of the stacks with an app.lua frame above the content
    handler chain, of all those through it, its names seen)."""
    good = tot = 0
    seen = set()
    for frames, w in folded:
        i = next((k for k, f in enumerate(frames) if f in CONTENT_CHAIN), None)
        if i is None or frames[i - 1] != "ngx_http_core_content_phase":
            continue
        tot += w
        seen.add(frames[i])
        if any(e2e.app_frame(f) for f in frames[i + 1:]):
            good += w
    return good, tot, sorted(seen)


def load_names():
    """{definition line: NAME} of app.lua's functions as a load names them
    (`function M.f(` -> M.f, `local function f(` -> f)."""
    out = {}
    with open(e2e.APP) as f:
        for i, line in enumerate(f, 1):
            m = re.match(r"(?:local )?function ((?:M\.)?\w+)\(", line)
            if m:
                out[i] = m.group(1)
    return out


def check_names(folded):
    """Every app.lua frame of a named function carries the name a start
    with LUAJIT_PERF gives it (the module's main chunk is long collected
    when ljperf switches the worker on)."""
    want = load_names()
    good, bad = set(), set()
    for frames, _ in folded:
        for fr in frames:
            m = e2e.FRAME_RE.match(fr)
            if m and int(m.group(1)) in want:
                (good if fr.startswith(want[int(m.group(1))] + "@") else bad).add(fr)
    return ljptest.report(
        bool(good) and not bad,
        "app.lua's functions named as at load: %s; otherwise named: %s"
        % (", ".join(sorted({f.split("@")[0] for f in good})), sorted(bad)))


def record(opts, ngx, workers, how, tmp):
    """One ljperf recording under load; returns (ok, requests/s during)."""
    print("== ljperf record %s" % how)
    sys.stdout.flush()
    out = os.path.join(tmp, "prof-" + how.split()[0].strip("-"))
    args = how.split() + ["--duration", str(opts.seconds), "-F", str(opts.freq), "-o", out]
    load = wrk(ngx.url, opts.seconds + 5)
    watch = OnWatch(workers)
    try:
        watch.start()
        r = subprocess.run([sys.executable, opts.ljperf, "record"] + args,
                           capture_output=True, text=True, timeout=300)
        on = watch.done()
        t_end = time.monotonic()
        print("ljperf record %s -> %d\n%s" % (" ".join(args), r.returncode,
                                               r.stderr.strip()[-1500:]))
        rps = wrk_result(load, opts.seconds + 60)
        # Recording is off again at each worker's next poll: it must run Lua
        # for that (ljperf switches off when it ends, after perf inject and
        # lj_merge, by which time this load may be over), so short bursts
        # of load until both are off.
        off = {}
        while time.monotonic() < t_end + opts.off_wait and len(off) < len(workers):
            load = wrk(ngx.url, 1)
            while load.poll() is None:
                for w in workers:
                    if w not in off and is_off(w):
                        off[w] = time.monotonic() - t_end
                time.sleep(0.01)
            load.communicate()
        load = None
    finally:
        if load is not None:
            load.kill()
            load.wait()
    ok = ljptest.report(r.returncode == 0, "ljperf record %s writes the profile" % how)
    ok = ljptest.report(
        sorted(on) == sorted(workers),
        "both workers switched on (latency from ljperf's start: %s)"
        % ", ".join("%d %.2f s" % (w, on[w]) for w in sorted(on))) and ok
    ok = ljptest.report(
        sorted(off) == sorted(workers),
        "after ljperf ends both workers are off again (nremote 0, ack == seq): %s"
        % ", ".join("%d after %.2f s" % (w, off[w]) for w in sorted(off))) and ok
    if r.returncode != 0:
        return False, rps
    ok = e2e.check_roots(out, set(workers)) and ok
    folded = e2e.load_folded(os.path.join(out, "profile.folded"))
    unit = min((w for _, w in folded), default=1)
    ok = e2e.check_folded(folded, unit) and ok
    ok = check_names(folded) and ok
    good, tot, seen = app_under_content_handler(folded)
    ok = ljptest.report(
        good >= e2e.MIN_SAMPLES * unit,
        "app.lua frames under ngx_http_core_content_phase -> the content handler "
        "(%s): %d of its %d samples"
        % (", ".join(seen), good // unit, tot // unit)) and ok
    if not ok and opts.keep:
        shutil.copytree(out, opts.keep + "-" + os.path.basename(out), dirs_exist_ok=True)
    return ok, rps


def run(opts):
    tmp = tempfile.mkdtemp(prefix="ljperf-or-remote-")
    ngx = luaapp.without_perf_env(serve.Nginx(opts.nginx, workers=2, perf_env=False))
    pids = []
    try:
        workers, pids, ok = luaapp.start_workers(ngx)
        ok = ljptest.report(all(is_off(w) and not is_on(w) for w in workers) and
                            not pid_files(pids),
                            "started without LUAJIT_PERF: off, no file in /tmp (%s)"
                            % pid_files(pids)) and ok
        before = wrk_result(wrk(ngx.url, opts.before), opts.before + 60)
        ref = identity.responses(ngx)
        during = []
        for how in ("-p %s" % ",".join(map(str, workers)), "--nginx %d" % ngx.master):
            good, rps = record(opts, ngx, workers, how, tmp)
            ok = good and ok
            during.append(rps)
        if ngx.proc.poll() is not None:
            ljptest.fail("nginx exited: " + ngx.errors())
        ok = ljptest.report(ngx.worker_pids() == workers,
                            "the same workers serve on (%s)" % ngx.worker_pids()) and ok
        ok = ljptest.report(identity.responses(ngx) == ref,
                            "they answer %d requests exactly as before the recordings"
                            % len(ref)) and ok
        after = wrk_result(wrk(ngx.url, opts.before), opts.before + 60)
        left = pid_files(pids)
        allowed = {os.path.basename(f) for w in workers for f in ljptest.tmp_files(w)}
        ok = ljptest.report(set(left) <= allowed,
                            "in /tmp only the running workers' perf map and jitdump: %s"
                            % left) and ok
        print("RATE nginx: requests/s before %.0f, during %s, after %.0f"
              % (before, ", ".join("%.0f" % x for x in during), after))
        return ok
    finally:
        ngx.stop()
        ljptest.remove_tmp_files(pids)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nginx", required=True)
    p.add_argument("--ljperf", required=True)
    p.add_argument("--seconds", type=int, default=6, help="recording time of each ljperf")
    p.add_argument("--before", type=int, default=2, help="wrk time before and after")
    p.add_argument("--off-wait", type=float, default=10.0,
                   help="seconds the workers get to switch off after ljperf ends")
    p.add_argument("--freq", type=int, default=1999)
    p.add_argument("--keep", metavar="DIR", help="keep a failing recording in DIR-*")
    o = p.parse_args()
    ljptest.need_perf_and_wrk()
    return run(o)


if __name__ == "__main__":
    ljptest.main(main)
