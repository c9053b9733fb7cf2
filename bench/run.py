#!/usr/bin/env python3
"""ljperf benchmark runner: patched LuaJIT (bin/luajit) vs control
(bin/luajit-base).

Each program in bench/progs takes an iteration count as its only argument
and prints "checksum ..." as its last line. For every (program, mode) the two
VMs are run alternately (the order flips every round), --runs rounds; the
MINIMUM wall time per (program, VM, mode) is kept. Printed per program: both
minima and the ratio patched/base; per mode: the geometric mean and the
maximum ratio. Both VMs must print the same checksum in every run, otherwise
the program is reported as FAILED and the exit status is 1.

  run.py                         # all programs, modes jit and joff, 5 runs
  run.py --only fib,oop --modes joff --runs 9
  run.py --patched-env LUAJIT_PERF=frames   # extra env for the patched VM only
  run.py --instructions          # also instruction counts via perf stat
  run.py --quick --runs 1        # tiny sizes: smoke test (ctest bench.smoke)

Sizes (iteration counts) are per program and mode, chosen so one run takes
roughly 0.5-2 s on luajit-base on the reference machine (2 shared cores);
--scale multiplies them.
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGS = os.path.join(HERE, "progs")

# program: (jit size, joff size, quick size). Measured on the reference
# machine with luajit-base (see bench/README.md, "Sizes").
SIZES = {
    "alloc":        (2700000,   2400000, 2000),
    "calls":        (70000000, 20000000, 5000),
    "cfuncs":       (1400000,   1000000, 2000),
    "closures":     (4000000,   2400000, 2000),
    "coroutines":   (8000000,   10000000, 2000),
    "ffi_calls":    (500000000, 5000000, 5000),
    "fib":          (37,             35, 15),
    "nbody":        (3500000,    800000, 1000),
    "oop":          (250000000, 4000000, 2000),
    "pcall_loop":   (20000000, 12000000, 2000),
    "spectral":     (3800,          800, 20),
    "strings":      (2500000,   1800000, 2000),
    "strscan":      (4000,         3000, 5),
    "tables_array": (600,           200, 1),
    "tables_hash":  (3500,         3000, 1),
    "varargs":      (6000000,   4000000, 2000),
}

CHECKSUM = re.compile(r"^checksum (.*)$", re.M)


def parse_env(items):
    env = {}
    for item in items or []:
        if "=" not in item:
            sys.exit("run.py: --patched-env expects NAME=VALUE, got %r" % item)
        k, v = item.split("=", 1)
        env[k] = v
    return env


class PerfStat:
    """Instruction counts with `perf stat -e instructions -x,`."""

    def __init__(self):
        self.perf = shutil.which("perf")
        self.reason = None
        if not self.perf:
            self.reason = "perf not found"
            return
        probe = self.count(["/bin/true"], os.environ.copy())
        if probe is None:
            self.reason = self.reason or "instructions event not supported here"

    def count(self, cmd, env):
        fd, path = tempfile.mkstemp(prefix="ljbench-perf-")
        os.close(fd)
        try:
            p = subprocess.run([self.perf, "stat", "-e", "instructions:u", "-x,",
                                "-o", path, "--"] + cmd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if p.returncode != 0:
                self.reason = "perf stat failed: %s" % p.stderr.decode(errors="replace").strip()[:200]
                return None
            with open(path) as f:
                for line in f:
                    fields = line.strip().split(",")
                    if len(fields) >= 3 and fields[2].startswith("instructions"):
                        try:
                            return int(fields[0])
                        except ValueError:
                            self.reason = "counter %s" % fields[0]
                            return None
            return None
        finally:
            os.unlink(path)


def run_once(vm, mode, prog, size, env, timeout):
    cmd = [vm] + (["-joff"] if mode == "joff" else []) + [os.path.join(PROGS, prog + ".lua"), str(size)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=PROGS, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    dt = time.perf_counter() - t0
    out = p.stdout.decode(errors="replace")
    m = CHECKSUM.findall(out)
    if p.returncode != 0 or not m:
        err = p.stderr.decode(errors="replace").strip()
        return dt, None, "exit %d: %s" % (p.returncode, err[-300:] or out[-300:])
    return dt, m[-1], None


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def add_vm_args(ap):
    """--bin-dir, --patched, --base: the two VMs compared (also icount.py)."""
    ap.add_argument("--bin-dir", default=os.path.join(os.path.dirname(HERE), "build", "bin"),
                    help="directory with luajit and luajit-base (default: <repo>/build/bin)")
    ap.add_argument("--patched", help="patched VM (default: BIN_DIR/luajit)")
    ap.add_argument("--base", help="control VM (default: BIN_DIR/luajit-base)")


def make_parser():
    ap = argparse.ArgumentParser(description="Benchmark patched vs control LuaJIT.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    add_vm_args(ap)
    ap.add_argument("--runs", type=int, default=5, help="rounds per program and mode (default 5)")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--modes", default="jit,joff", help="comma-separated: jit,joff")
    ap.add_argument("--patched-env", action="append", metavar="NAME=VALUE",
                    help="extra environment for the patched VM only (repeatable)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply all sizes")
    ap.add_argument("--instructions", action="store_true",
                    help="also report instruction-count ratios (perf stat)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run")
    ap.add_argument("--list", action="store_true", help="list programs and sizes")
    return ap


def select(opts, progs, patched, base):
    """The programs and modes OPTS ask for; exits on an unknown one or a
    VM that is not there."""
    if opts.only:
        want = [w.strip() for w in opts.only.split(",") if w.strip()]
        unknown = [w for w in want if w not in progs]
        if unknown:
            sys.exit("run.py: unknown program(s): %s (have: %s)" % (", ".join(unknown), ", ".join(progs)))
        progs = want
    modes = [m.strip() for m in opts.modes.split(",") if m.strip()]
    for m in modes:
        if m not in ("jit", "joff"):
            sys.exit("run.py: unknown mode %r (jit, joff)" % m)
    missing = [p for p in progs if p not in SIZES]
    if missing:
        sys.exit("run.py: no sizes for: %s" % ", ".join(missing))
    for vm in (patched, base):
        if not os.access(vm, os.X_OK):
            sys.exit("run.py: %s is not executable (build first or pass --bin-dir)" % vm)
    return progs, modes


class Results:
    """Minimum seconds and instructions per (prog, mode, vm); failures and
    the checksum per (prog, mode)."""

    def __init__(self):
        self.best = {}      # (prog, mode, vm) -> min seconds
        self.insns = {}     # (prog, mode, vm) -> min instructions
        self.failed = {}    # (prog, mode) -> reason
        self.checks = {}    # (prog, mode) -> checksum


def measure(opts, progs, modes, size_of, vms, perf):
    """--runs rounds over PROGS x MODES, the two VMS (name, path, env)
    alternating in order round by round."""
    res = Results()
    for r in range(opts.runs):
        for prog in progs:
            for mode in modes:
                if (prog, mode) in res.failed:
                    continue
                order = list(vms)
                if r % 2 == 1:
                    order.reverse()
                for name, vm, env in order:
                    if not measure_one(opts, res, (prog, mode, name), size_of(prog, mode),
                                       vm, env, perf if r == 0 else None):
                        break
        print("round %d/%d done" % (r + 1, opts.runs), file=sys.stderr)
        sys.stderr.flush()
    return res


def measure_one(opts, res, key, size, vm, env, perf):
    """One run of KEY (prog, mode, vm name) into RES; False if it failed."""
    prog, mode, name = key
    try:
        dt, ck, err = run_once(vm, mode, prog, size, env, opts.timeout)
    except subprocess.TimeoutExpired:
        dt, ck, err = None, None, "timeout"
    if err:
        res.failed[(prog, mode)] = "%s: %s" % (name, err)
        return False
    prev = res.checks.setdefault((prog, mode), ck)
    if prev != ck:
        res.failed[(prog, mode)] = "checksum mismatch: %s printed %r, expected %r" % (name, ck, prev)
        return False
    res.best[key] = min(res.best.get(key, dt), dt)
    if perf:
        cmd = [vm] + (["-joff"] if mode == "joff" else []) + [os.path.join(PROGS, prog + ".lua"), str(size)]
        n = perf.count(cmd, env)
        if n is not None:
            res.insns[key] = n
    return True


def report(res, progs, modes, size_of):
    """The table, then per mode the geometric mean and the worst ratio."""
    print()
    hdr = "%-14s %-5s %9s %10s %10s %8s" % ("program", "mode", "size", "base s", "patched s", "ratio")
    if res.insns:
        hdr += " %10s" % "insn ratio"
    print(hdr)
    print("-" * len(hdr))
    ratios = {m: [] for m in modes}
    iratios = {m: [] for m in modes}
    for prog in progs:
        for mode in modes:
            if (prog, mode) in res.failed:
                print("%-14s %-5s FAILED: %s" % (prog, mode, res.failed[(prog, mode)]))
                continue
            b, p = res.best[(prog, mode, "base")], res.best[(prog, mode, "patched")]
            ratio = p / b
            ratios[mode].append((ratio, prog))
            line = "%-14s %-5s %9d %10.3f %10.3f %8.3f" % (prog, mode, size_of(prog, mode), b, p, ratio)
            ib, ip = res.insns.get((prog, mode, "base")), res.insns.get((prog, mode, "patched"))
            if ib and ip:
                iratios[mode].append(ip / ib)
                line += " %10.4f" % (ip / ib)
            print(line)
    print()
    for mode in modes:
        rs = ratios[mode]
        if not rs:
            print("%-5s no results" % mode)
            continue
        mx = max(rs)
        line = "%-5s geomean %.3f   max %.3f (%s)   n=%d" % (mode, geomean([x for x, _ in rs]), mx[0], mx[1], len(rs))
        if iratios[mode]:
            line += "   insn geomean %.4f" % geomean(iratios[mode])
        print(line)


def main():
    opts = make_parser().parse_args()

    # Absolute: the programs run in bench/progs.
    patched = os.path.abspath(opts.patched or os.path.join(opts.bin_dir, "luajit"))
    base = os.path.abspath(opts.base or os.path.join(opts.bin_dir, "luajit-base"))
    progs = sorted(f[:-4] for f in os.listdir(PROGS) if f.endswith(".lua"))
    if opts.list:
        for p in progs:
            print("%-14s jit=%s joff=%s quick=%s" % ((p,) + SIZES.get(p, ("?",) * 3)))
        return 0
    progs, modes = select(opts, progs, patched, base)

    env_base = dict(os.environ)
    for k in ("LUA_PATH", "LUA_CPATH", "LUA_INIT", "LUAJIT_PERF"):
        env_base.pop(k, None)
    extra = parse_env(opts.patched_env)
    env_patched = dict(env_base)
    env_patched.update(extra)

    perf = PerfStat() if opts.instructions else None
    if perf and perf.reason:
        print("note: --instructions unavailable (%s); reporting times only" % perf.reason)
        perf = None

    def size_of(prog, mode):
        s = SIZES[prog][2] if opts.quick else SIZES[prog][0 if mode == "jit" else 1]
        return max(1, int(round(s * (1 if opts.quick else opts.scale))))

    print("patched: %s%s" % (patched, "  env: " + " ".join("%s=%s" % kv for kv in extra.items()) if extra else ""))
    print("base:    %s" % base)
    print("runs: %d, modes: %s%s" % (opts.runs, ",".join(modes), ", quick sizes" if opts.quick else ""))
    sys.stdout.flush()

    res = measure(opts, progs, modes, size_of,
                  [("patched", patched, env_patched), ("base", base, env_base)], perf)
    report(res, progs, modes, size_of)
    if res.failed:
        print("\n%d program/mode combination(s) FAILED" % len(res.failed))
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
