#!/usr/bin/env python3
"""Requests/s of examples/openresty on build/bin/nginx vs build/bin/nginx-base.

  python3 -m bench.openresty.run [--bin-dir build/bin] [--rounds 5]
          [--seconds 5] [--workers 1] [--connections 8]

Variants: base (nginx-base), off (nginx, LUAJIT_PERF unset), on (nginx,
LUAJIT_PERF=1: perf map, jitdump and Lua frame records; no perf running).
Every round starts each variant afresh from its own prefix (order rotated
each round), warms it up for 2 s, then measures with `wrk -t1 -c N -d S -s
examples/openresty/load.lua` on loopback, and the workers' CPU time (user +
system, /proc) over that run. Prints each run, then per variant the median
requests/s and the median worker CPU time per request, and their ratios
off/base and on/base. On a busy machine req/s follows the scheduler; the CPU
time per request is the steadier measure of the VM's cost. Not a test.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from examples.openresty import serve
from tests.lib import ljptest  # tmp_files

LOAD = os.path.join(ROOT, "examples", "openresty", "load.lua")


def wrk(url, seconds, conns):
    """(requests/s, requests)"""
    r = subprocess.run(["wrk", "-t1", "-c%d" % conns, "-d%ds" % seconds, "-s", LOAD, url],
                       capture_output=True, text=True, timeout=seconds + 30)
    m = re.search(r"Requests/sec:\s+([\d.]+)", r.stdout)
    n = re.search(r"(\d+) requests in", r.stdout)
    if r.returncode != 0 or not m or not n:
        sys.exit("wrk failed: " + (r.stdout + r.stderr)[-500:])
    return float(m.group(1)), int(n.group(1))


def cpu_seconds(pids):
    """user + system CPU time of PIDS so far."""
    t = 0
    for p in pids:
        with open("/proc/%d/stat" % p) as f:
            st = f.read()
        fields = st[st.rfind(")") + 2:].split()
        t += int(fields[11]) + int(fields[12])
    return t / os.sysconf("SC_CLK_TCK")


def one(binary, env, o):
    ngx = serve.Nginx(binary, workers=o.workers, env=env)
    pids = []
    try:
        ngx.start()
        pids = [ngx.master] + ngx.worker_pids()
        wrk(ngx.url, 2, o.connections)
        workers = ngx.worker_pids()
        c0 = cpu_seconds(workers)
        rps, n = wrk(ngx.url, o.seconds, o.connections)
        return rps, (cpu_seconds(workers) - c0) / n * 1e6
    finally:
        ngx.stop()
        ljptest.remove_tmp_files(pids)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--connections", type=int, default=8)
    o = p.parse_args()
    variants = [("base", os.path.join(o.bin_dir, "nginx-base"), {"LUAJIT_PERF": ""}),
                ("off", os.path.join(o.bin_dir, "nginx"), {"LUAJIT_PERF": ""}),
                ("on", os.path.join(o.bin_dir, "nginx"), {"LUAJIT_PERF": "1"})]
    res = {v[0]: [] for v in variants}
    cpu = {v[0]: [] for v in variants}
    for rnd in range(o.rounds):
        order = variants[rnd % 3:] + variants[:rnd % 3]
        for name, binary, env in order:
            rps, us = one(binary, env, o)
            res[name].append(rps)
            cpu[name].append(us)
            print("round %d %-4s %9.0f req/s  %7.1f us worker CPU/request" % (
                rnd + 1, name, rps, us))
            sys.stdout.flush()
    med = {k: statistics.median(v) for k, v in res.items()}
    print()
    print("median req/s: base %.0f, off %.0f, on %.0f" % (med["base"], med["off"], med["on"]))
    print("ratio off/base %.3f, on/base %.3f" % (med["off"] / med["base"],
                                                  med["on"] / med["base"]))
    mc = {k: statistics.median(v) for k, v in cpu.items()}
    print("median worker CPU us/request: base %.1f, off %.1f, on %.1f" % (
        mc["base"], mc["off"], mc["on"]))
    print("requests per CPU second, ratio off/base %.3f, on/base %.3f" % (
        mc["base"] / mc["off"], mc["base"] / mc["on"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
