#!/usr/bin/env python3
"""ljperf cost in instructions: patched LuaJIT (bin/luajit) vs control
(bin/luajit-base), counted by valgrind, not timed.

Wall time on a shared machine swings by more than the VM change costs;
instruction counts do not. Every program of bench/progs (sizes from run.py,
times --scale) runs once on the control and once on the patched VM per
recording setting, under

  setarch -R valgrind --tool=cachegrind --cache-sim=no --smc-check=all-non-file

with LuaJIT's random seed fixed (LD_PRELOAD of the build's
tests/inline/detseed.so). ASLR off and a fixed seed make heap layout, mcode
placement and hence trace formation repeat: both VMs make the same traces
(without the fixed seed fib JIT counts 249M to 370M on the same VM); JIT
code is re-read when it changes. Printed per program: the control's count and the
patched/control ratio for each setting; per mode: geometric mean and worst.
Both VMs must print the same checksum, else the program is FAILED (exit 1).

  python3 -m bench.icount                   # all programs, jit and joff
  python3 -m bench.icount --only fib,calls --modes joff
  python3 -m bench.icount --settings off,frames   # LUAJIT_PERF unset / =frames
  python3 -m bench.icount --scale 0.2       # bigger runs (default 0.05)
  python3 -m bench.icount --modes jit --layouts 7  # JIT: median over 7 heap layouts
  python3 -m bench.icount --seed-shim none  # LuaJIT seeds at random (noisy JIT)
(from the source root: it imports bench.run and bench.layout)

arm64 VMs (cross-built, tests/arm64/build-luajit) are counted under
qemu-aarch64 by a TCG plugin, bench/qemu_icount.c, built on the fly:

  python3 -m bench.icount --counter qemu-aarch64 --patched A64/luajit --base A64/luajit-base

with the seed shim cross-built from tests/inline/detseed.c and given to the
guest alone; ASLR off (setarch -R on qemu) makes the guest's layout repeat:
the same VM twice counts the same to 0.1% (tests/arm64/test_icount.py checks
the counter on a hand-counted loop).

Settings: off (LUAJIT_PERF unset), or any LUAJIT_PERF value (frames, map,
jitdump, 1). Counts include the VM's start-up (~1M instructions): sizes
are chosen so a run counts 50M-1G instructions.
"""

import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
from bench import run as wallclock  # program sizes and checksum format
from bench import layout  # the layout-shifting wrapper

IREFS = re.compile(r"I\s+refs:\s+([\d,]+)")
QEMU_SYSROOT = "/usr/aarch64-linux-gnu"


class Qemu:
    """The arm64 counter: qemu-aarch64 with bench/qemu_icount.c, a plugin
    built here with the host compiler. The seed shim is an aarch64 library
    given to the guest alone (-E): LD_PRELOAD in the environment would reach
    the x86-64 qemu too."""

    def __init__(self, tmp, shim):
        self.plugin = os.path.join(tmp, "qemu_icount.so")
        self.out = os.path.join(tmp, "qemu_icount.out")
        self.shim = shim
        src = os.path.join(HERE, "qemu_icount.c")
        r = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", self.plugin, src],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.exit("icount.py: building %s failed: %s" % (src, r.stdout.strip()[-300:]))

    def cmd(self, argv):
        if os.path.exists(self.out):
            os.unlink(self.out)
        return (["setarch", "-R", "qemu-aarch64", "-L", QEMU_SYSROOT,
                 "-plugin", self.plugin + ",out=" + self.out] +
                (["-E", "LD_PRELOAD=" + self.shim] if self.shim else []) + argv)

    def report(self, stderr):
        try:
            with open(self.out) as f:
                return f.read()
        except OSError:
            return stderr


def instructions(argv, env, cwd, tmp, qemu=None):
    """Instructions of one run of ARGV (a VM and its arguments) with ASLR
    off, under cachegrind or, given QEMU (a Qemu), under qemu-aarch64, and
    its stdout; None and a reason if it failed. Removes the perf map a
    LUAJIT_PERF run leaves."""
    if qemu:
        cmd = qemu.cmd(argv)
    else:
        cmd = ["setarch", "-R", "valgrind", "--tool=cachegrind", "--cache-sim=no",
               "--smc-check=all-non-file",
               "--cachegrind-out-file=" + os.path.join(tmp, "cg.out")] + argv
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = (b.decode(errors="replace") for b in p.communicate())
    try:    # the VM runs in valgrind's (qemu's) process: the map is perf-PID.map
        os.unlink("/tmp/perf-%d.map" % p.pid)
    except OSError:
        pass
    m = IREFS.search(qemu.report(stderr) if qemu else stderr)
    if p.returncode != 0 or not m:
        return None, "exit %d: %s" % (p.returncode, (stderr or stdout).strip()[-300:])
    return int(m.group(1).replace(",", "")), stdout


def count(vm, mode, prog, size, env, tmp, pad=None, qemu=None):
    """Instructions of one run, and its checksum (None and a reason if not).
    PAD: run under layout.py's wrapper with that many padding tables; QEMU:
    counted under qemu-aarch64 (instructions())."""
    argv = [vm] + (["-joff"] if mode == "joff" else [])
    if pad is not None:
        argv += [os.path.join(tmp, "layout.lua"), str(pad)]
    argv += [os.path.join(wallclock.PROGS, prog + ".lua"), str(size)]
    n, stdout = instructions(argv, env, wallclock.PROGS, tmp, qemu)
    sums = wallclock.CHECKSUM.findall(stdout) if n is not None else None
    if not sums:
        return None, None, stdout if n is None else "no checksum: " + stdout[-300:]
    return n, sums[-1], None


def scaled(prog, size, scale):
    """run.py's SIZE times SCALE in work, whatever the program's growth."""
    if prog == "fib":           # work grows by the golden ratio per step
        return max(5, size + int(round(math.log(scale) / math.log(1.618))))
    if prog == "spectral":      # quadratic in N
        return max(2, int(round(size * math.sqrt(scale))))
    return max(1, int(round(size * scale)))


def counts(vm, mode, prog, size, env, tmp, layouts, qemu=None):
    """Median instructions over LAYOUTS heap layouts (1: the program alone),
    the checksum, or None, None and a reason."""
    if layouts == 1:
        return count(vm, mode, prog, size, env, tmp, qemu=qemu)
    ns, sums = [], set()
    for pad in range(layouts):
        n, sm, err = count(vm, mode, prog, size, env, tmp, pad, qemu)
        if err:
            return None, None, "layout %d: %s" % (pad, err)
        ns.append(n)
        sums.add(sm)
    if len(sums) != 1:
        return None, None, "checksums differ between layouts: %s" % sorted(sums)
    return int(statistics.median(ns)), sums.pop(), None


def cross_shim(tmp):
    """tests/inline/detseed.c built for aarch64 into TMP: the seed shim
    of --counter qemu-aarch64."""
    src = os.path.join(HERE, os.pardir, "tests", "inline", "detseed.c")
    so = os.path.join(tmp, "detseed-aarch64.so")
    r = subprocess.run(["aarch64-linux-gnu-gcc", "-shared", "-fPIC", "-O2", "-o", so, src, "-ldl"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("icount.py: cross-building %s failed: %s" % (src, r.stdout.strip()[-300:]))
    return so


def env_for(setting, base_env):
    env = dict(base_env)
    if setting != "off":
        env["LUAJIT_PERF"] = setting
    return env


def make_parser():
    ap = argparse.ArgumentParser(description="Instruction counts, patched vs control LuaJIT.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    wallclock.add_vm_args(ap)
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--modes", default="jit,joff", help="comma-separated: jit,joff")
    ap.add_argument("--settings", default="off,frames,1",
                    help="patched VM settings: off or LUAJIT_PERF values (default off,frames,1)")
    ap.add_argument("--scale", type=float, default=0.05,
                    help="multiply run.py's sizes (default 0.05)")
    ap.add_argument("--layouts", type=int, default=1,
                    help="median over this many heap layouts (bench/layout.py's "
                         "padding, 0..N-1 tables) per VM; with the seed fixed "
                         "most JIT counts do not move with the layout, some may "
                         "(default 1: the program alone)")
    ap.add_argument("--seed-shim", default=None,
                    help="LD_PRELOAD library fixing LuaJIT's random seed (default "
                         "BIN_DIR/../tests/inline/detseed.so, with --counter "
                         "qemu-aarch64 tests/inline/detseed.c cross-built; none: no shim)")
    ap.add_argument("--counter", choices=("cachegrind", "qemu-aarch64"), default="cachegrind",
                    help="what counts: valgrind's cachegrind (x86-64 VMs, the default) "
                         "or qemu-aarch64 with bench/qemu_icount.c (aarch64 VMs: "
                         "gcc-aarch64-linux-gnu, qemu-user)")
    return ap


def check(opts):
    """(seed shim, patched VM, control VM, programs, modes, settings) from
    OPTS; exits on what is missing or unknown."""
    if opts.layouts < 1:
        sys.exit("icount.py: --layouts must be >= 1")
    qemu = opts.counter == "qemu-aarch64"
    shim = opts.seed_shim or (None if qemu else
                              os.path.join(opts.bin_dir, "..", "tests", "inline", "detseed.so"))
    if shim not in (None, "none"):
        if not os.path.isfile(shim):
            sys.exit("icount.py: %s not found: build the tests (cmake --build) or pass "
                     "--seed-shim PATH (--seed-shim none: random seeds, JIT counts vary "
                     "from run to run)" % shim)

    tools = [("setarch", "util-linux")]
    if not qemu:
        tools.append(("valgrind", "valgrind"))
    else:
        tools += [("qemu-aarch64", "qemu-user"), ("cc", "gcc")]
        if shim is None:
            tools.append(("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"))
    for tool, pkg in tools:
        if not shutil.which(tool):
            sys.exit("icount.py: %s not found (apt-get install %s)" % (tool, pkg))
    if qemu and not os.path.isdir(QEMU_SYSROOT):
        sys.exit("icount.py: %s not found (apt-get install libc6-arm64-cross)" % QEMU_SYSROOT)
    # Absolute: the programs run in bench/progs.
    patched = os.path.abspath(opts.patched or os.path.join(opts.bin_dir, "luajit"))
    base = os.path.abspath(opts.base or os.path.join(opts.bin_dir, "luajit-base"))
    for vm in (patched, base):
        if not os.access(vm, os.X_OK):
            sys.exit("icount.py: %s is not executable (build first or pass --bin-dir)" % vm)
    progs = sorted(wallclock.SIZES)
    if opts.only:
        want = [w.strip() for w in opts.only.split(",") if w.strip()]
        unknown = [w for w in want if w not in wallclock.SIZES]
        if unknown:
            sys.exit("icount.py: unknown program(s): %s" % ", ".join(unknown))
        progs = want
    modes = [m for m in opts.modes.split(",") if m]
    if any(m not in ("jit", "joff") for m in modes):
        sys.exit("icount.py: modes are jit and joff")
    settings = [s for s in opts.settings.split(",") if s]
    if not settings:
        sys.exit("icount.py: no settings")
    return shim, patched, base, progs, modes, settings


def count_program(opts, vms, prog, mode, settings, base_env, tmp, ratios):
    """One table row: PROG in MODE on the control VM, then on the patched
    VM per setting (ratios into RATIOS). Returns the number of failures."""
    patched, base = vms
    size = scaled(prog, wallclock.SIZES[prog][0 if mode == "jit" else 1], opts.scale)
    n0, sum0, err = counts(base, mode, prog, size, base_env, tmp, opts.layouts, opts.qemu)
    if err:
        print("%-14s %-4s FAILED (base): %s" % (prog, mode, err))
        return 1
    failed = 0
    cells = []
    for s in settings:
        n, sm, err = counts(patched, mode, prog, size, env_for(s, base_env), tmp,
                            opts.layouts, opts.qemu)
        if err or sm != sum0:
            print("%-14s %-4s FAILED (%s): %s" % (prog, mode, s,
                  err or "checksum %s, base %s" % (sm, sum0)))
            failed += 1
            cells.append("%9s" % "-")
            continue
        ratios[(mode, s)].append(n / n0)
        cells.append("%9.4f" % (n / n0))
        for f in os.listdir(tmp):   # drop jitdumps and maps now
            if f.startswith("jit-"):
                os.unlink(os.path.join(tmp, f))
    print("%-14s %-4s %14d  %s" % (prog, mode, n0, "  ".join(cells)))
    sys.stdout.flush()
    return failed


def main():
    opts = make_parser().parse_args()
    shim, patched, base, progs, modes, settings = check(opts)

    base_env = dict(os.environ)
    for k in ("LUA_PATH", "LUA_CPATH", "LUA_INIT", "LUAJIT_PERF"):
        base_env.pop(k, None)
    tmp = tempfile.mkdtemp(prefix="ljbench-icount-")
    base_env["LUAJIT_PERF_DIR"] = tmp   # jitdumps of "1" runs land here
    opts.qemu = None
    if opts.counter == "qemu-aarch64":
        opts.qemu = Qemu(tmp, None if shim == "none" else shim or cross_shim(tmp))
    elif shim != "none":
        base_env["LD_PRELOAD"] = shim
    with open(os.path.join(tmp, "layout.lua"), "w") as f:
        f.write(layout.WRAPPER)
    failed = 0
    ratios = {(m, s): [] for m in modes for s in settings}
    try:
        print("%-14s %-4s %14s  %s" % ("program", "mode", "base insns",
                                       "  ".join("%9s" % s for s in settings)))
        for mode in modes:
            for prog in progs:
                failed += count_program(opts, (patched, base), prog, mode, settings,
                                        base_env, tmp, ratios)
        print()
        for mode in modes:
            for s in settings:
                r = ratios[(mode, s)]
                if r:
                    worst = max(r)
                    print("%-4s %-7s geomean %.4f (%+.2f%%)  worst %.4f (%+.2f%%)"
                          % (mode, s, wallclock.geomean(r), 100 * (wallclock.geomean(r) - 1),
                             worst, 100 * (worst - 1)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
