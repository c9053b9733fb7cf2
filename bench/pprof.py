#!/usr/bin/env python3
"""pprof writing cost next to lj_merge (not a ctest).

usage: python3 -m bench.pprof [--min-lines N] [--stacks N]   (from the source root)

1. lj_merge's benchmark input (bench/lj_merge.py: >= N perf script
   lines from the fixtures) through lj_merge --lines --jit-tag --tid into
   folded stacks; then the same folded stacks written as pprof in process
   (ljperf/pprof.py: parse + Profile.add + write) against writing them
   as folded text. Best of 3 each.
2. Synthetic: --stacks distinct stacks of 30 frames (Lua names with lines)
   drawn from 3000 distinct frames (locations shared, as in a real
   profile), and the worst case: every frame of every stack a new location.
Times are CPU seconds (the machine may be shared).
"""
import argparse
import io
import os
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
from bench import lj_merge as lj_bench
from ljperf import pprof


def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def best(fn, runs=3):
    t = None
    for _ in range(runs):
        t0 = cpu()
        fn()
        dt = cpu() - t0
        t = dt if t is None else min(t, dt)
    return t


def writers(lines):
    """(folded seconds, pprof seconds, pprof bytes) for folded LINES."""
    def folded():
        buf = io.StringIO()
        for ln in lines:
            stack, _, w = ln.rpartition(" ")
            buf.write("%s %d\n" % (stack, int(w)))

    out = io.BytesIO()

    def to_pprof():
        out.seek(0)
        out.truncate()
        p = pprof.Profile(period_ns=1000)
        pprof.from_folded(lines, p)
        p.write(out)
    return best(folded), best(to_pprof), len(out.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--min-lines", type=int, default=1000000)
    ap.add_argument("--stacks", type=int, default=100000)
    o = ap.parse_args()
    fd, path = tempfile.mkstemp(prefix="pprof_bench.", suffix=".txt")
    try:
        n = lj_bench.build_input(o.min_lines, fd)
        args = ["--jitdump", os.path.join(lj_bench.FIX, "fakevm"), "--lines", "--jit-tag",
                "--tid"]
        res = []

        def merge():
            r = subprocess.run([sys.executable, lj_bench.LJ_MERGE] + args + [path],
                               capture_output=True, text=True, check=True)
            res[:] = r.stdout.splitlines(True)
        t_merge = best(merge)
        lines = res
        f, p, size = writers(lines)
        print("lj_merge on %d perf script lines: %.2f s -> %d distinct stacks" %
              (n, t_merge, len(lines)))
        print("  write them: folded %.4f s, pprof %.4f s (%d bytes gzipped): "
              "pprof adds %.2f%% to lj_merge" % (f, p, size, 100.0 * p / t_merge))
    finally:
        os.unlink(path)
    def frame(k, line):
        return "f%d@/app/mod%d.lua:%d:%d" % (k % 500, k % 40, k % 500 * 10 + 1, line)
    shared = [";".join(frame(k, k % 6) for k in ((i * 7919 + d * 104729) % 3000
                                                   for d in range(30)))
              for i in range(o.stacks)]
    worst = [";".join(frame(i * 31 + d, (i + d) % 97) for d in range(30))
             for i in range(o.stacks // 5)]
    for what, stacks in (("3000 shared frames", shared), ("all frames new", worst)):
        syn = ["proc-%d;main;%s %d\n" % (i % 7, st, 1 + i % 13) for i, st in enumerate(stacks)]
        f, p, size = writers(syn)
        print("synthetic, %d distinct stacks of 30 frames, %s: folded %.2f s, pprof %.2f s "
              "(%d bytes gzipped), %.1f us per stack" % (len(syn), what, f, p, size,
                                                         1e6 * p / len(syn)))


if __name__ == "__main__":
    main()
