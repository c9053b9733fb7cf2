#!/usr/bin/env python3
"""Does call-heavy Lua code look heavier than it is while ljperf records?
(a benchmark, not a test)

  python3 -m bench.distortion [--bin-dir build/bin] [--modes jit,joff]
                              [--runs 5] [--rounds 1000] [--freq 20000]

bench/distortion.lua alternates ROUNDS times between fib(N) (recursive
Lua: one call per node, the case frame recording costs most) and C work
through the FFI (ffilib_spin of tests/fpchain's libffilib.so, sized once
per mode so that both phases take about as long), and times each phase
itself with the process CPU clock. Per mode and run it is started three
times, each printing its own split (the Lua phase's share of the two):

  own (off)     no perf, LUAJIT_PERF unset: the true split
  own (frames)  no perf, LUAJIT_PERF=frames: what recording costs the calls
  own (perf)    under `perf record -g --call-graph fp --user-regs=r13 -F
                FREQ` (ljperf's command line, ljperf/perfcmd.py) with
                LUAJIT_PERF=1: frames on, and the jitdump lj_merge names
                the Lua frames from
  profile       that recording, `perf script | lj_merge`: the weight
                (period) of stacks holding fib over those holding
                ffilib_spin; samples with neither (the loop, os.clock)
                are left out and shown as `other`
  cpu(perf)     the program's CPU time (both phases) under perf over its
                time without: what sampling at FREQ costs it

Each run's row, then per mode the medians and the range of the differences
(points): frames-off (what recording costs the calls), prof-off (the
profile against the true split: the issue's target is +-2 points) and
prof-perf (the profile against its own run's clock). Every program runs
with LuaJIT's seed fixed and ASLR off (tests/inline/detseed.so, setarch
-R, as bench.icount), so all runs make the same traces; the rest of the
spread is the machine. All perf data, jitdumps and the build-id cache go
to a temporary directory, removed at the end (with the perf maps in /tmp
of the recorded processes).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
from ljperf import perfcmd
from ljperf.folded import load_folded
from ljperf.messages import Fail
from tests.lib import ljptest  # dump_pids, remove_tmp_files

PROG = os.path.join(HERE, "distortion.lua")
LJ_MERGE = os.path.join(ROOT, "perf-script", "lj_merge.py")
# mode: (luajit flags, default fib N: about half a millisecond per call)
MODES = {"jit": ([], 25), "joff": (["-joff"], 23)}
FIELDS = "comm,pid,tid,time,period,event,ip,sym,symoff,dso,uregs"
TARGET = 2.0  # points


def die(msg):
    sys.exit("bench.distortion: " + msg)


def parse_split(out, what):
    """The program's `split lua=.. c=.. share=.. checksum=..` line."""
    for line in out.splitlines():
        if line.startswith("split "):
            return {k: float(v) for k, v in (w.split("=", 1) for w in line.split()[1:])}
    die("%s printed no split line: %r" % (what, out[-300:]))


def prog_argv(o, mode, *args):
    """The program's command line: with the seed shim and ASLR off (setarch
    -R) unless --seed-shim none; env and setarch exec it in place (perf
    records that pid, and LD_PRELOAD reaches the program, not perf)."""
    wrap = [] if o.seed_shim == "none" else ["env", "LD_PRELOAD=" + o.seed_shim,
                                              "setarch", "-R"]
    return wrap + [os.path.join(o.bin_dir, "luajit")] + MODES[mode][0] + \
        [PROG, o.ffilib] + [str(a) for a in args]


def prog_env(perf_value=None, perf_dir=None):
    env = dict(os.environ)
    env.pop("LUAJIT_PERF", None)
    env.pop("LUAJIT_PERF_DIR", None)
    if perf_value:
        env["LUAJIT_PERF"] = perf_value
    if perf_dir:
        env["LUAJIT_PERF_DIR"] = perf_dir
    return env


def run_plain(o, mode, fib_n, spin_n, perf_value=None):
    what = "%s run (LUAJIT_PERF=%s)" % (mode, perf_value or "")
    r = subprocess.run(prog_argv(o, mode, o.rounds, fib_n, spin_n),
                       env=prog_env(perf_value), capture_output=True, text=True)
    if r.returncode != 0:
        die("%s failed (%d): %s" % (what, r.returncode, r.stderr.strip()[-300:]))
    return parse_split(r.stdout, what)


def calibrate(o, mode, fib_n):
    r = subprocess.run(prog_argv(o, mode, "calibrate", fib_n), env=prog_env(),
                       capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("spin_n="):
            return int(line.split("=", 1)[1])
    die("%s calibration failed (%d): %s" % (mode, r.returncode,
                                            (r.stderr or r.stdout).strip()[-300:]))


def classify(frames):
    """'c' (under ffilib_spin), 'lua' (under fib, a Lua or trace frame) or
    'other', for one folded stack's frames."""
    if "ffilib_spin" in frames:
        return "c"
    if any(f.split("@", 1)[0] == "fib" for f in frames):
        return "lua"
    return "other"


def run_perf(o, perf, event, mode, fib_n, spin_n):
    """One recorded run: (the program's split, {kind: weight}, samples)."""
    tmp = tempfile.mkdtemp(prefix="ljperf-distortion-")
    try:
        data = os.path.join(tmp, "perf.data")
        argv = perfcmd.record_argv(perf, tmp, data, event, o.freq) + ["--"] + \
            prog_argv(o, mode, o.rounds, fib_n, spin_n)
        r = subprocess.run(argv, env=prog_env("1", tmp), capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(data):
            die("perf record of the %s run failed (%d): %s"
                % (mode, r.returncode, r.stderr.strip()[-300:]))
        own = parse_split(r.stdout, "%s run under perf" % mode)
        script = subprocess.Popen(
            perfcmd.perf_argv(perf, tmp, "script", "-i", data, "-F", FIELDS,
                              "--show-task-events"),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        folded = os.path.join(tmp, "profile.folded")
        merge = subprocess.Popen([sys.executable, LJ_MERGE, "--jitdump", tmp, "-o", folded],
                                 stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        samples = 0  # sample lines (a comm first; the chain lines are indented)
        for line in script.stdout:
            if line[:1] not in (b" ", b"\t", b"\n") and b"PERF_RECORD_" not in line:
                samples += 1
            merge.stdin.write(line)
        merge.stdin.close()
        err = merge.stderr.read().decode(errors="replace")
        if script.wait() != 0 or merge.wait() != 0:
            die("perf script | lj_merge failed on the %s run: %s" % (mode, err.strip()[-300:]))
        weights = {"lua": 0, "c": 0, "other": 0}
        for frames, n in load_folded(folded):
            weights[classify(frames)] += n
        if not weights["lua"] or not weights["c"]:
            die("the %s profile has no %s samples" % (mode, "fib" if not weights["lua"]
                                                       else "ffilib_spin"))
        return own, weights, samples, perfcmd.event_name(perf, tmp, data)
    finally:
        ljptest.remove_tmp_files(ljptest.dump_pids(tmp))
        shutil.rmtree(tmp, ignore_errors=True)


def pick_event(perf, wanted):
    if wanted:
        return wanted
    ok, _ = perfcmd.perf_probe(perf, "cycles:u")
    return "cycles:u" if ok else "cpu-clock:u"


def main():
    ap = argparse.ArgumentParser(
        prog="python3 -m bench.distortion", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run from the source root.")
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"),
                    help="where luajit is (default: build/bin)")
    ap.add_argument("--ffilib", help="libffilib.so (default: BIN_DIR/../tests/fpchain/)")
    ap.add_argument("--modes", default="jit,joff", help="comma list of jit, joff")
    ap.add_argument("--runs", type=int, default=5, help="runs per mode (medians; default 5)")
    ap.add_argument("--rounds", type=int, default=1000,
                    help="Lua/C alternations per run (default 1000, ~1 ms each)")
    ap.add_argument("--fib-n", type=int,
                    help="fib argument (default: jit %d, joff %d)"
                    % (MODES["jit"][1], MODES["joff"][1]))
    ap.add_argument("--spin-n", type=int, help="ffilib_spin iterations (default: calibrated)")
    ap.add_argument("--freq", type=int, default=20000, help="perf -F (default 20000)")
    ap.add_argument("--event", help="perf event (default cycles:u, else cpu-clock:u)")
    ap.add_argument("--seed-shim",
                    help="LD_PRELOAD library fixing LuaJIT's random seed, run with ASLR "
                         "off, so that every run makes the same traces (default "
                         "BIN_DIR/../tests/inline/detseed.so; none: random seeds, the "
                         "JIT split then moves by points from run to run)")
    o = ap.parse_args()
    modes = [m for m in o.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            ap.error("unknown mode %r (jit, joff)" % m)
    if o.runs < 1 or o.rounds < 1:
        ap.error("--runs and --rounds must be at least 1")
    o.ffilib = o.ffilib or os.path.join(o.bin_dir, os.pardir, "tests", "fpchain",
                                        "libffilib.so")
    o.seed_shim = o.seed_shim or os.path.join(o.bin_dir, os.pardir, "tests", "inline",
                                              "detseed.so")
    for path in (os.path.join(o.bin_dir, "luajit"), o.ffilib) + \
            ((o.seed_shim,) if o.seed_shim != "none" else ()):
        if not os.path.exists(path):
            die("%s not found (build first, or give --bin-dir/--ffilib/--seed-shim)" % path)
    if o.seed_shim != "none" and not shutil.which("setarch"):
        die("setarch not found (util-linux), or pass --seed-shim none")
    try:
        perf = perfcmd.need_perf()
        event = pick_event(perf, o.event)
        perfcmd.check_access(perf, event)
    except Fail as e:
        die(str(e))

    print("bench.distortion: %s at -F %d, %d run(s) per mode, %d rounds of fib(N) / "
          "ffilib_spin(M) each; shares: the Lua phase's of the two; differences "
          "in points, per run" % (event, o.freq, o.runs, o.rounds))
    head = ("mode", "run", "own(off)", "own(frames)", "own(perf)", "profile", "frames-off",
            "prof-off", "prof-perf", "other", "samples", "cpu(perf)")
    line = "%-5s %6s %9s %11s %9s %8s %10s %9s %9s %6s %8s %9s"
    print(line % head)
    summary = []
    for mode in modes:
        fib_n = o.fib_n or MODES[mode][1]
        spin_n = o.spin_n or calibrate(o, mode, fib_n)
        runs = []
        for i in range(o.runs):
            plain = run_plain(o, mode, fib_n, spin_n)
            off = plain["share"]
            frames = run_plain(o, mode, fib_n, spin_n, "frames")["share"]
            own, w, n, recorded = run_perf(o, perf, event, mode, fib_n, spin_n)
            prof = 100.0 * w["lua"] / (w["lua"] + w["c"])
            r = {"off": off, "frames": frames, "perf": own["share"], "profile": prof,
                 "frames-off": frames - off, "prof-off": prof - off,
                 "prof-perf": prof - own["share"],
                 "other": 100.0 * w["other"] / sum(w.values()), "samples": n,
                 "cpu": (own["lua"] + own["c"]) / (plain["lua"] + plain["c"])}
            runs.append(r)
            print(row(line, mode, str(i + 1), r))
            sys.stdout.flush()
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(row(line, mode, "median", med))
        if o.runs > 1:
            print("%-5s %6s %s" % (mode, "range", "  ".join(
                "%s %+.1f..%+.1f" % (k, min(r[k] for r in runs), max(r[k] for r in runs))
                for k in ("frames-off", "prof-off", "prof-perf"))))
        summary.append((mode, fib_n, spin_n, med))
    print("(event recorded: %s)" % recorded)
    for mode, fib_n, spin_n, m in summary:
        d = m["prof-off"]
        print("%s (fib(%d), ffilib_spin(%d)): the profile reads %+.1f points from the "
              "true split (recording itself %+.1f, the profile against its own run "
              "%+.1f): %s the +-%.0f-point target"
              % (mode, fib_n, spin_n, d, m["frames-off"], m["prof-perf"],
                 "within" if abs(d) <= TARGET else "OUTSIDE", TARGET))


def row(line, mode, label, r):
    return line % (mode, label, "%.1f%%" % r["off"], "%.1f%%" % r["frames"],
                   "%.1f%%" % r["perf"], "%.1f%%" % r["profile"],
                   "%+.1f" % r["frames-off"], "%+.1f" % r["prof-off"],
                   "%+.1f" % r["prof-perf"], "%.1f%%" % r["other"], "%d" % r["samples"],
                   "x%.2f" % r["cpu"])

if __name__ == "__main__":
    main()
