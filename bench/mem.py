#!/usr/bin/env python3
"""What `ljperf record --mem` costs a running program: wall time of the
allocation-heavy bench programs on the patched VM under perf record, CPU
profile only (as `ljperf record`) against CPU profile plus allocation
samples (as `ljperf record --mem`, at the default rate or --rate); the
jitdump and frame records on in both.

  python3 -m bench.mem                      # alloc closures strings tables_hash, jit
  python3 -m bench.mem --modes jit,joff --rounds 7 --rate 65536

The settings run alternately, --rounds times, with ASLR off and LuaJIT's
random seed fixed (--seed-shim, as bench.icount: otherwise trace formation
alone moves closures by 50% between runs); the program's own elapsed time
(GNU time, inside perf record) is kept, the minimum per setting. Also
printed: the traps perf recorded per run, per allocation sample (the frees
ride on allocation traps: a trap of their own per 7 at most), the ratio with
samples on but no perf (the sampler's own cost in the VM, from the same
rounds). Both settings must print the same checksum.
Instruction counts of the sampler alone: bench.icount --settings off,mem.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from bench.run import PROGS, SIZES, geomean
from ljperf import memory, vmregs
from ljperf.perfcmd import perf_argv as perf_cmd, record_argv

PROGRAMS = ("alloc", "closures", "strings", "tables_hash")


def perf_argv(tmp, mem):
    """perf record as `ljperf record` runs it (with MEM: as `--mem`)."""
    return record_argv("perf", tmp, os.path.join(tmp, "perf.data"), "cpu-clock", 999,
                       mem) + ["--"]


def run(argv, env, tmp):
    """(elapsed seconds of the program, its stdout's last line)."""
    tfile = os.path.join(tmp, "time")
    r = subprocess.run(argv_with_time(argv, tfile), env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
    if r.returncode != 0:
        sys.exit("bench.mem: %s failed: %s" % (" ".join(argv), r.stderr.decode()[-300:]))
    with open(tfile) as f:
        elapsed = float(f.read().split()[-1])
    return elapsed, r.stdout.decode().strip().splitlines()[-1]


def argv_with_time(argv, tfile):
    """ARGV (perf ... -- PROG ARGS, or PROG ARGS) with GNU time around PROG,
    ASLR off."""
    timed = ["setarch", "-R", "/usr/bin/time", "-o", tfile, "-f", "%e"]
    if "--" in argv:
        i = argv.index("--") + 1
        return argv[:i] + timed + argv[i:]
    return timed + argv


def traps(tmp):
    """(traps, allocation samples) in the last recording: page-fault
    samples whose registers carry the tag (memory.decode), and those of
    them that are allocations (the rest carry frees only)."""
    r = subprocess.run(perf_cmd("perf", tmp, "script", "-i", os.path.join(tmp, "perf.data"),
                                "-F", "event,uregs"),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True)
    n = allocs = 0
    for line in r.stdout.splitlines():        # "EVENT:  ABI:2    AX:0x...  ..."
        event, sep, _ = line.partition(" ABI:")
        if sep and memory.is_fault_event(event.strip().rstrip(":")):
            trap = memory.decode(line)
            n += trap is not None
            allocs += trap is not None and trap.type == vmregs.T_ALLOC
    return n, allocs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "build", "bin"), help="where luajit is (build/bin)")
    ap.add_argument("--only", default=",".join(PROGRAMS), help="programs (comma list)")
    ap.add_argument("--modes", default="jit", help="jit, joff or both (comma list)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rate", type=int, default=0,
                    help="bytes between samples (default: the VM's, 512 KiB)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies run.py's sizes")
    ap.add_argument("--seed-shim", default=None,
                    help="LD_PRELOAD fixing LuaJIT's seed (default: BIN_DIR/../tests/inline/"
                         "detseed.so; none: random)")
    opts = ap.parse_args()
    luajit = os.path.join(opts.bin_dir, "luajit")
    if not shutil.which("perf") or not os.access(luajit, os.X_OK):
        sys.exit("bench.mem: needs perf and %s" % luajit)
    env0 = dict(os.environ)
    for k in ("LUAJIT_PERF", "LUAJIT_PERF_MEMRATE", "LUAJIT_PERF_DIR"):
        env0.pop(k, None)
    tmp = tempfile.mkdtemp(prefix="ljperf-bench-mem-")
    env0["LUAJIT_PERF_DIR"] = tmp
    shim = opts.seed_shim or os.path.join(os.path.dirname(os.path.abspath(opts.bin_dir)),
                                          "tests", "inline", "detseed.so")
    if shim != "none":
        if not os.path.isfile(shim):
            sys.exit("bench.mem: no seed shim %s (build the project, or --seed-shim none)"
                     % shim)
        env0["LD_PRELOAD"] = shim
    # No perf map: it would be left in /tmp (the jitdump names the code)
    settings = {
        "cpu": (True, "jitdump,frames"),
        "cpu+mem": (True, "jitdump,frames,mem"),
        "no perf": (False, None),
        "mem, no perf": (False, "mem"),
    }
    print("program        mode   cpu (s)  +mem (s)  ratio  traps/run  per sample   "
          "no perf (s)  mem (s)  ratio")
    ratios, vm_ratios, per_sample = [], [], []
    try:
        for mode in opts.modes.split(","):
            for prog in opts.only.split(","):
                size = int(SIZES[prog][0 if mode == "jit" else 1] * opts.scale)
                cmd = [luajit] + (["-joff"] if mode == "joff" else []) + \
                      [os.path.join(PROGS, prog + ".lua"), str(size)]
                best, sums, ntraps = {}, set(), (0, 0)
                for rnd in range(opts.rounds):
                    names = list(settings)
                    for name in (names if rnd % 2 == 0 else names[::-1]):
                        under_perf, perf_env = settings[name]
                        env = dict(env0)
                        if perf_env:
                            env["LUAJIT_PERF"] = perf_env
                        if opts.rate:
                            env["LUAJIT_PERF_MEMRATE"] = str(opts.rate)
                        argv = (perf_argv(tmp, name == "cpu+mem") if under_perf else []) + cmd
                        t, last = run(argv, env, tmp)
                        sums.add(last)
                        best[name] = min(best.get(name, t), t)
                        if name == "cpu+mem":
                            ntraps = traps(tmp)
                        for f in os.listdir(tmp):
                            if f.startswith(("jit-", "jitted-")):
                                os.unlink(os.path.join(tmp, f))
                if len(sums) != 1:
                    sys.exit("bench.mem: %s %s: checksums differ: %r" % (prog, mode, sums))
                r = best["cpu+mem"] / best["cpu"]
                v = best["mem, no perf"] / best["no perf"]
                ratios.append(r)
                vm_ratios.append(v)
                print("%-14s %-5s %8.3f %9.3f %6.3f %10d %11.3f %12.3f %8.3f %6.3f"
                      % (prog, mode, best["cpu"], best["cpu+mem"], r, ntraps[0],
                         ntraps[0] / max(ntraps[1], 1), best["no perf"],
                         best["mem, no perf"], v))
                per_sample.append(ntraps[0] / max(ntraps[1], 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("geomean under perf %.3f (worst %.3f); without perf %.3f (worst %.3f); "
          "traps per sample at most %.3f"
          % (geomean(ratios), max(ratios), geomean(vm_ratios), max(vm_ratios),
             max(per_sample)))


if __name__ == "__main__":
    main()
