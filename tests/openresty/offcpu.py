#!/usr/bin/env python3
"""Off-CPU profile of nginx under wrk: `ljperf record --off-cpu --lines
--nginx MASTER` on build/bin/nginx (2 workers) serving
tests/openresty/blocky.lua on loopback: /block (M.block blocks the worker
in ffi.C.usleep, 2 ms) and /compute, /hash (compute, never block), each
under its own wrk.

Checked:
record   ljperf exits 0, offcpu.folded, offcpu.html and offcpu.pb.gz are
         written; no wrk request failed (non-2xx or socket errors).
blocked  of the workers' [blocked] time (off-CPU, neither [idle] nor
         [preempted]: preemption goes wherever the machine's other load
         lands; the share of all non-idle time is printed), >= 95% sits
         under M.block's frame (name and definition line found in
         blocky.lua); where its current line is known (--lines), >= 95% of
         that time is at the usleep call's line. (With the JIT, a trace
         calls glibc's usleep directly and its return address is skipped:
         the line is then `?`; docs/offcpu.md.)
idle     [idle] holds the workers' waiting in epoll_wait under
         ngx_process_events_and_timers, no Lua frame in any [idle] stack;
         offcpu.html leaves it out.
Prints the seconds per kind and the shares. nginx is stopped, its prefix
and the workers' /tmp files removed. perf or wrk missing, or nginx not
starting, is a failure.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
import luaapp
from tests.lib import ljptest

APP = os.path.join(HERE, "blocky.lua")
MIN_SHARE = 0.95
SECONDS = 6


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


def run(opts):
    tmp = tempfile.mkdtemp(prefix="ljperf-or-offcpu-")
    ngx = luaapp.without_perf_env(BlockyNginx(opts.nginx, workers=2, perf_env=False))
    pids = []
    try:
        luaapp.start(ngx)
        workers = ngx.worker_pids()
        pids = [ngx.master] + workers
        out = os.path.join(tmp, "prof")
        loads = [(n, wrk(ngx.url + "/" + n, SECONDS + 4, c))
                 for n, c in (("block", 4), ("compute", 4), ("hash", 4))]
        args = ["record", "--off-cpu", "--lines", "--nginx", str(ngx.master),
                "--duration", str(SECONDS), "-o", out]
        lj = subprocess.run([sys.executable, opts.ljperf] + args, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=600)
        print("ljperf %s -> %d\n%s" % (" ".join(args), lj.returncode, lj.stderr.strip()[-2000:]))
        ok = ljptest.report(lj.returncode == 0, "ljperf record --off-cpu --nginx exits 0")
        for n, p in loads:
            ok = ljptest.report(wrk_ok(p, n), "no /%s request failed" % n) and ok
        if lj.returncode != 0:
            return False
        for f in ("offcpu.folded", "offcpu.html", "offcpu.pb.gz"):
            ok = ljptest.report(os.path.isfile(os.path.join(out, f)), "wrote " + f) and ok
        good = check(out, workers)
        if not good and opts.keep:
            shutil.copytree(out, opts.keep, dirs_exist_ok=True)
        return good and ok
    finally:
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
    under = sum(lines.values())
    non_idle = total + kinds.get("[preempted]", 0)
    print("M.block: %.1f%% of all non-idle off-CPU time; by current line: %s"
          % (100.0 * under / max(non_idle, 1),
             ", ".join("%s %.3f s" % (k, v / 1e9) for k, v in sorted(lines.items()))))
    ok = ljptest.report(total > 0 and under >= MIN_SHARE * total,
                        "M.block@blocky.lua:%d holds %.1f%% of the [blocked] time (>= %d%%)"
                        % (defn, 100.0 * under / max(total, 1), 100 * MIN_SHARE))
    known = sum(v for k, v in lines.items() if k != "?")
    ok = ljptest.report(known == 0 or lines.get(str(call), 0) >= MIN_SHARE * known,
                        "where its line is known (%.3f s), it is the usleep call's, %d"
                        % (known / 1e9, call)) and ok
    idle = {k: w for k, w in off.items() if k.endswith(";[idle]")}
    loop = sum(w for k, w in idle.items() if "ngx_process_events_and_timers" in k.split(";"))
    ok = ljptest.report(loop > 0 and all("@" not in k for k in idle),
                        "[idle]: %.3f s in the event loop (ngx_process_events_and_timers), "
                        "no Lua frame" % (loop / 1e9)) and ok
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
