#!/usr/bin/env python3
"""Heap snapshots (jit.perf.heapsnapshot, lj_heapsnap.c), measured (a
benchmark, not a test).

  python3 -m bench.heapsnap [--bin-dir build/bin] [--sizes 100k,1m]

For each size, bench/heapsnap.lua makes that many live objects and takes one
snapshot: the pause (the program stops for it), bytes on disk per node, and
how much the VM's RSS grew while writing (peak minus before) and how much of
that is file-backed (the writer's code, mapped by its first run: the rest is
its data), then how long `ljperf heap` takes to read and summarise the file.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def size_arg(s):
    s = s.strip().lower()
    mult = {"k": 1000, "m": 1000000}.get(s[-1:], 1)
    return int(float(s.rstrip("km")) * mult)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--sizes", default="100k,1m")
    ap.add_argument("--no-read", action="store_true", help="skip ljperf heap")
    opts = ap.parse_args()
    print("%10s %10s %9s %10s %9s %8s %12s %10s" % (
        "objects", "nodes", "pause s", "bytes/node", "RSS +KiB", "of it code", "GC heap MiB",
        "read s"))
    for n in (size_arg(s) for s in opts.sizes.split(",")):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "h.heapsnapshot")
            p = subprocess.run([os.path.join(opts.bin_dir, "luajit"),
                                os.path.join(HERE, "heapsnap.lua"), str(n), path],
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit("heapsnap.lua %d: %s" % (n, p.stderr.strip()))
            f = p.stdout.split()
            r = dict(zip(f[0::2], f[1::2]))
            nodes = int(r["nodes"])
            read = float("nan")
            if not opts.no_read:
                t0 = time.monotonic()
                subprocess.run([os.path.join(opts.bin_dir, "ljperf"), "heap", path],
                               capture_output=True, check=True)
                read = time.monotonic() - t0
            print("%10d %10d %9.3f %10.1f %9d %10d %12.1f %10.1f" % (
                n, nodes, float(r["pause"]), os.path.getsize(path) / nodes,
                int(r["hwm_kb"]) - int(r["rss_kb"]), int(r["file_kb"]),
                float(r["gc_bytes"]) / 2**20, read))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
