#!/usr/bin/env python3
"""Emitter cost and perf inject cost on the patched VM (prints numbers; not a test).

    python3 -m bench.emitter.bench [--bin-dir build/bin] [--runs 9] [--funcs 20000]
                                   [--quick] [--only cost|icount|inject]
(from the source root: it imports bench.icount and the ljperf package)

1. Emitter on vs off. Two generated programs, each run --runs times per
   variant, variants interleaved run by run:
     loads    FUNCS functions in FUNCS/100 generated chunk files (dofile),
              each function called once: nothing but loading
     traces   one generated chunk of 400 functions with three loops each,
              each function run 10 times: ~1200 root traces and their side
              traces, little else
   variants:  base (stock luajit-base), off (patched, LUAJIT_PERF unset),
              on (patched, LUAJIT_PERF=map,jitdump, dump in a directory on
              disk). Reports min and median of wall and CPU (user+sys) time,
              the on/off ratios (target: <= 1.02) and the cost per CODE_LOAD.
   --only icount counts instructions instead (valgrind, one run each: the
   ratios wall time on a shared machine cannot resolve; not by default).
2. perf inject --jit on the loads program recorded with
   `LUAJIT_PERF=1 perf record -k mono -g --call-graph fp`: time and number of
   jitted-*.so files (target: <= 10 s) with the dump directory and perf's
   build-id cache (perf --buildid-dir) both on disk, both on tmpfs, and the
   dump on tmpfs with the cache on disk (like the default ~/.debug), each
   with the full dump and pre-filtered to the loads that cover a sampled
   address (what `ljperf record` does before running inject: its
   prune_dumps(), timed together with inject).
   Every run is a fresh recording in a fresh directory.

On a shared machine take the numbers as a first reading: look at the load
average printed with them, and use more --runs for anything you quote.
"""

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
from bench import icount
from ljperf import jitdump
from ljperf.finish import prune_dumps

PER_CHUNK = 100

MOD_FN = """function M.f%(j)d(x)
  local y = x * %(j)d + %(i)d
  if y > 1000 then y = y %% 1000 end
  return y
end
"""

MAIN_LOADS = """-- %(n)d chunk files of %(per)d functions: load each, call each function once.
local dir, sum = arg[1], 0
for i = 1, %(n)d do
  local M = dofile(string.format("%%s/mod_%%04d.lua", dir, i))
  for j = 1, %(per)d do sum = (sum + M["f" .. j](i)) %% 1000000007 end
end
print("checksum", sum)
"""

MAIN_TRACES = """-- One chunk of %(n)d functions, each with three loops (root traces) whose
-- branches become side traces; every function runs 10 times.
local parts = {}
for k = 1, %(n)d do
  parts[#parts + 1] = string.format([[
F[%%d] = function(n)
  local s, t, u = 0, 0, 0
  for i = 1, n do if i %%%% 3 == 0 then s = s + i * %%d else s = s - %%d end end
  for i = 1, n do if i %%%% 5 == 0 then t = t + s %%%% 7 else t = t + 1 end end
  for i = 1, n do if i %%%% 2 == 0 then u = u + t else u = u - %%d end end
  return (s + t + u) %%%% 1000003
end]], k, k, k %% 7, k %% 5)
end
local F = {}
assert(loadstring("local F = ...\\n" .. table.concat(parts, "\\n"), "=traces_gen"))(F)
local sum = 0
for k = 1, %(n)d do
  for r = 1, 10 do sum = (sum + F[k](200)) %% 1000000007 end
end
print("checksum", sum)
"""


def generate(d, funcs):
    n = max(1, funcs // PER_CHUNK)
    for i in range(1, n + 1):
        with open(os.path.join(d, "mod_%04d.lua" % i), "w") as f:
            f.write("local M = {}\n")
            for j in range(1, PER_CHUNK + 1):
                f.write(MOD_FN % {"i": i, "j": j})
            f.write("return M\n")
    with open(os.path.join(d, "loads.lua"), "w") as f:
        f.write(MAIN_LOADS % {"n": n, "per": PER_CHUNK})
    with open(os.path.join(d, "traces.lua"), "w") as f:
        f.write(MAIN_TRACES % {"n": 400})
    return n * PER_CHUNK


def timed(cmd, env, cwd):
    """(wall s, stdout) of one run."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    # communicate() reaped the child: its rusage is in RUSAGE_CHILDREN deltas.
    if p.returncode != 0:
        sys.exit("%s failed: %s" % (" ".join(cmd), err.decode(errors="replace")[-500:]))
    return wall, out.decode()


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def base_env():
    env = dict(os.environ)
    for k in ("LUAJIT_PERF", "LUAJIT_PERF_DIR"):
        env.pop(k, None)
    return env


def count_loads(dump):
    return sum(1 for r in jitdump.read(dump) if isinstance(r, jitdump.CodeLoad))


def bench_cost(args, gen):
    progs = [("loads", ["loads.lua", gen]), ("traces", ["traces.lua"])]
    variants = [("base", os.path.join(args.bin_dir, "luajit-base"), None),
                ("off", os.path.join(args.bin_dir, "luajit"), None),
                ("on", os.path.join(args.bin_dir, "luajit"), "map,jitdump")]
    ddir = tempfile.mkdtemp(prefix="ljperf-bench-dump-", dir="/var/tmp")
    print("== emitter cost (%d runs per variant, interleaved; dump dir %s, on disk)" % (args.runs, ddir))
    try:
        for pname, pargs in progs:
            res = {v[0]: {"wall": [], "cpu": []} for v in variants}
            sums = set()
            nloads = mapsz = dumpsz = None
            for run in range(args.runs + 1):            # run 0 warms the caches, not counted
                order = variants if run % 2 == 0 else list(reversed(variants))
                for vname, binary, perf in order:
                    env = base_env()
                    if perf:
                        env["LUAJIT_PERF"] = perf
                        env["LUAJIT_PERF_DIR"] = ddir
                    c0 = cpu_children()
                    wall, out = timed([binary] + pargs, env, gen)
                    cpu = cpu_children() - c0
                    sums.add(out.strip())
                    if run > 0:
                        res[vname]["wall"].append(wall)
                        res[vname]["cpu"].append(cpu)
                    for f in os.listdir(ddir):
                        m = re.match(r"jit-(\d+)\.dump$", f)
                        if m:
                            pid = int(m.group(1))
                            mp = "/tmp/perf-%d.map" % pid
                            if nloads is None:
                                nloads = count_loads(os.path.join(ddir, f))
                                dumpsz = os.path.getsize(os.path.join(ddir, f))
                                mapsz = os.path.getsize(mp) if os.path.exists(mp) else 0
                            if os.path.exists(mp):
                                os.unlink(mp)
                        os.unlink(os.path.join(ddir, f))
            if len(sums) != 1:
                sys.exit("%s: outputs differ between variants: %s" % (pname, sums))
            print("%s: %d CODE_LOADs (dump %.1f MB, map %.1f MB), output %s"
                  % (pname, nloads, dumpsz / 1e6, mapsz / 1e6, sums.pop()))
            print("  %-5s %9s %9s %9s %9s" % ("", "wall min", "wall med", "cpu min", "cpu med"))
            for vname, _, _ in variants:
                w, c = res[vname]["wall"], res[vname]["cpu"]
                print("  %-5s %8.3fs %8.3fs %8.3fs %8.3fs" % (vname, min(w), statistics.median(w),
                                                             min(c), statistics.median(c)))
            for what in ("wall", "cpu"):
                on, off = res["on"][what], res["off"][what]
                print("  on/off %s: %.3f (min)  %.3f (median)   -> %+.1f%%; %.2f us per CODE_LOAD (median)"
                      % (what, min(on) / min(off), statistics.median(on) / statistics.median(off),
                         100 * (statistics.median(on) / statistics.median(off) - 1),
                         1e6 * (statistics.median(on) - statistics.median(off)) / nloads))
            per = (statistics.median(res["on"]["cpu"]) - statistics.median(res["off"]["cpu"])) / nloads
            print("  -> <= 2%% extra needs >= %.2f s of CPU time per %d CODE_LOADs (%.0f us each / 2%%)"
                  % (per * nloads / 0.02, nloads, 1e6 * per / 0.02))
            off, base = res["off"]["cpu"], res["base"]["cpu"]
            print("  off/base cpu: %.3f (min)  %.3f (median)" % (min(off) / min(base),
                                                                statistics.median(off) / statistics.median(base)))
    finally:
        shutil.rmtree(ddir, ignore_errors=True)


def bench_icount(args, gen):
    """The cost in instructions (valgrind; ASLR off and, with the build's
    seed shim, LuaJIT's seed fixed): one run per program and variant, the
    counts repeat from run to run."""
    shim = os.path.join(args.bin_dir, "..", "tests", "inline", "detseed.so")
    if not shutil.which("valgrind") or not shutil.which("setarch"):
        sys.exit("bench.py --only icount: needs valgrind and setarch "
                 "(apt-get install valgrind util-linux)")
    ddir = tempfile.mkdtemp(prefix="ljperf-bench-dump-", dir="/var/tmp")
    print("== emitter cost in instructions (seed shim: %s)"
          % (shim if os.path.isfile(shim) else "none, JIT counts vary"))
    try:
        for pname, pargs in (("loads", ["loads.lua", gen]), ("traces", ["traces.lua"])):
            n, outs, nloads = {}, set(), 0
            for vname, binary, perf in (("base", "luajit-base", None), ("off", "luajit", None),
                                        ("on", "luajit", "map,jitdump")):
                env = base_env()
                if os.path.isfile(shim):
                    env["LD_PRELOAD"] = shim
                if perf:
                    env["LUAJIT_PERF"] = perf
                    env["LUAJIT_PERF_DIR"] = ddir
                n[vname], out = icount.instructions([os.path.join(args.bin_dir, binary)] + pargs,
                                                    env, gen, ddir)
                if n[vname] is None:
                    sys.exit("%s (%s): %s" % (pname, vname, out))
                outs.add(out.strip())
                for f in os.listdir(ddir):
                    if re.match(r"jit-\d+\.dump$", f):
                        nloads = count_loads(os.path.join(ddir, f))
                    os.unlink(os.path.join(ddir, f))
            if len(outs) != 1:
                sys.exit("%s: outputs differ between variants: %s" % (pname, outs))
            print("%s: %d CODE_LOADs; instructions base %d, off %d, on %d" % (
                pname, nloads, n["base"], n["off"], n["on"]))
            print("  on/off %.4f  on/base %.4f  off/base %.4f; %.0f instructions per CODE_LOAD" % (
                n["on"] / n["off"], n["on"] / n["base"], n["off"] / n["base"],
                (n["on"] - n["off"]) / max(nloads, 1)))
    finally:
        shutil.rmtree(ddir, ignore_errors=True)


def record(args, gen, d):
    """perf record of the loads program with its dump in D. Returns (data, pid)."""
    env = base_env()
    env["LUAJIT_PERF"] = "1"
    env["LUAJIT_PERF_DIR"] = d
    data = os.path.join(d, "perf.data")
    r = subprocess.run(["perf", "--buildid-dir", os.path.join(d, ".debug"), "record", "-q", "-k", "mono",
                        "-F", "999", "-g", "--call-graph", "fp", "-o", data, "--",
                        os.path.join(args.bin_dir, "luajit"), "loads.lua", gen],
                       env=env, cwd=gen, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("perf record failed: " + r.stderr[-500:])
    # jit-PID.dump (its .inline file beside it also starts with jit-)
    pid = int([m for m in (re.match(r"jit-(\d+)\.dump$", f) for f in os.listdir(d)) if m][0].group(1))
    return data, pid


def inject_once(d, bid):
    """Times perf inject --jit on D/perf.data (build-id cache BID); returns
    (seconds, .so files)."""
    subprocess.run(["sync"])
    t0 = time.perf_counter()
    r = subprocess.run(["perf", "--buildid-dir", bid, "inject", "--jit",
                        "-i", os.path.join(d, "perf.data"), "-o", os.path.join(d, "perf.jit.data")],
                       capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit("perf inject failed: " + r.stderr[-500:])
    return dt, sum(1 for f in os.listdir(d) if f.startswith("jitted-"))


def bench_inject(args, gen):
    """Each run records the loads program into a fresh directory and times
    perf inject there (the real workflow: nothing left from an earlier run),
    once with the full dump and once (another recording) pre-filtered."""
    runs = max(3, args.runs // 3)
    print("== perf inject --jit, loads program (%d runs each, a fresh recording per run)" % runs)
    # The build-id cache perf inject hard-links every .so into: next to the
    # dump, or (tmpfs+disk) on disk like ~/.debug, where links fail and perf
    # copies the files.
    for label, parent, bparent in (("disk", "/var/tmp", None), ("tmpfs", "/dev/shm", None),
                                   ("tmpfs+disk", "/dev/shm", "/var/tmp")):
        res = {"full": [], "pruned": []}
        info = {}
        for _ in range(runs):
            for kind in ("full", "pruned"):
                d = tempfile.mkdtemp(prefix="ljperf-bench-inject-", dir=parent)
                bdir = tempfile.mkdtemp(prefix="ljperf-bench-buildid-", dir=bparent) if bparent else None
                bid = os.path.join(bdir or d, ".debug")
                pid = None
                try:
                    data, pid = record(args, gen, d)
                    dump = os.path.join(d, "jit-%d.dump" % pid)
                    nloads = count_loads(dump)
                    t0 = time.perf_counter()
                    if kind == "pruned":
                        prune_dumps("perf", d, data)
                    dtp = time.perf_counter() - t0
                    dt, nso = inject_once(d, bid)
                    dt += dtp
                    res[kind].append(dt)
                    info.setdefault(kind, []).append((nloads, nso))
                finally:
                    if pid:
                        try:
                            os.unlink("/tmp/perf-%d.map" % pid)
                        except OSError:
                            pass
                    shutil.rmtree(d, ignore_errors=True)
                    if bdir:
                        shutil.rmtree(bdir, ignore_errors=True)
                    subprocess.run(["sync"])
        for kind in ("full", "pruned"):
            t = res[kind]
            print("%-10s %-12s %5d CODE_LOADs -> %5d .so (max of runs); inject %.2f s min, %.2f s median, "
                  "%.2f s max" % (label, kind, max(x[0] for x in info[kind]), max(x[1] for x in info[kind]),
                                  min(t), statistics.median(t), max(t)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--funcs", type=int, default=20000)
    ap.add_argument("--quick", action="store_true", help="2000 functions, 2 runs")
    ap.add_argument("--only", choices=("cost", "icount", "inject"),
                    help="one part: cost (wall and CPU time), icount (instructions "
                         "by valgrind, not run by default), inject")
    args = ap.parse_args()
    if args.quick:
        args.funcs, args.runs = 2000, 2
    args.bin_dir = os.path.abspath(args.bin_dir)  # programs run in the gen dir
    for b in ("luajit", "luajit-base"):
        if not os.access(os.path.join(args.bin_dir, b), os.X_OK):
            sys.exit("%s/%s is not built" % (args.bin_dir, b))
    gen = tempfile.mkdtemp(prefix="ljperf-bench-gen-", dir="/var/tmp")
    try:
        n = generate(gen, args.funcs)
        print("machine: %d CPUs, load average %s; %d functions generated in %s"
              % (os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg()), n, gen))
        if args.only in (None, "cost"):
            bench_cost(args, gen)
        if args.only == "icount":
            bench_icount(args, gen)
        if args.only in (None, "inject"):
            bench_inject(args, gen)
        print("load average at the end: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    finally:
        shutil.rmtree(gen, ignore_errors=True)


if __name__ == "__main__":
    main()
