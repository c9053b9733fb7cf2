#!/usr/bin/env python3
"""How much of a JIT ratio is heap-layout luck (prints numbers; not a test).

    python3 -m bench.layout PROG [--size N] [--shifts 32] [--bin-dir build/bin]
                            [--patched-env NAME=VALUE]
(from the source root: it imports bench.run)

LuaJIT's hot counters are indexed by bytecode address bits, so where a
program's prototypes land in the heap decides which loops and calls
collide and which traces form. A recursive benchmark (fib) can run 2x
faster or slower from one layout to the next, and two VMs whose startup
allocates a few bytes differently see different layouts for the same
program. This runs bench/progs/PROG.lua on both VMs under SHIFTS layouts
(the program is loaded after 0..SHIFTS-1 small live tables) and prints the
program's own time (os.clock) per VM: min, median and mean over the
layouts, and the ratios patched/base of those. A ratio that follows the
layout and not the VM is no cost of the patch.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
from bench import run  # SIZES

WRAPPER = """local k, prog, n = tonumber(arg[1]), arg[2], arg[3]
local pad = {}
for i = 1, k do pad[i] = {} end   -- live: shifts what is allocated next
local f = assert(loadfile(prog))
arg = { [0] = prog, n }
local t0 = os.clock()
f(n)
io.stderr:write(("ljperf-layout %.6f\\n"):format(os.clock() - t0))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("prog")
    ap.add_argument("--size", type=int, help="the program's argument (default: run.py's JIT size)")
    ap.add_argument("--shifts", type=int, default=32)
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--patched-env", action="append", default=[], metavar="NAME=VALUE")
    a = ap.parse_args()
    path = os.path.join(HERE, "progs", a.prog + ".lua")
    if not os.path.isfile(path):
        sys.exit("no such program: %s" % path)
    size = a.size or run.SIZES[a.prog][0]
    penv = dict(os.environ)
    for kv in a.patched_env:
        k, _, v = kv.partition("=")
        penv[k] = v
    vms = [("base", os.path.join(a.bin_dir, "luajit-base"), dict(os.environ)),
           ("patched", os.path.join(a.bin_dir, "luajit"), penv)]
    times = {n: [] for n, _, _ in vms}
    with tempfile.TemporaryDirectory(prefix="ljperf-layout-") as d:
        w = os.path.join(d, "wrap.lua")
        with open(w, "w") as f:
            f.write(WRAPPER)
        for k in range(a.shifts):
            for name, vm, env in (vms if k % 2 == 0 else vms[::-1]):
                r = subprocess.run([vm, w, str(k), path, str(size)], env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                line = [l for l in r.stderr.splitlines() if l.startswith("ljperf-layout ")]
                if r.returncode != 0 or not line:
                    sys.exit("%s failed on %s: %s" % (vm, a.prog, r.stderr[-300:]))
                times[name].append(float(line[-1].split()[1]))
    print("%s, size %d, %d layouts (program time, s)" % (a.prog, size, a.shifts))
    stats = {}
    for name, t in times.items():
        stats[name] = (min(t), statistics.median(t), statistics.mean(t), max(t))
        print("  %-8s min %.3f  median %.3f  mean %.3f  max %.3f" % ((name,) + stats[name]))
    b, p = stats["base"], stats["patched"]
    print("  patched/base: min %.3f  median %.3f  mean %.3f"
          % (p[0] / b[0], p[1] / b[1], p[2] / b[2]))


if __name__ == "__main__":
    main()
