#!/usr/bin/env python3
"""What `ljperf record --off-cpu` costs a program that switches often: a
pipe ping-pong with a forked child (bench/offcpu/pingpong.lua), paced near
--rate context switches per second (default 10,000: both processes block
once per round trip), under perf record as `ljperf record` runs it (CPU
profile only) and as `ljperf record --off-cpu` runs it (plus a sample of
every context switch and the switch records).

  python3 -m bench.offcpu                   # 10,000 switches/s, 5 rounds
  python3 -m bench.offcpu --rate 20000 --rounds 7 --seconds 3

The pacing (computation between round trips) is calibrated once without
perf. The settings run alternately, --rounds times; the program's own time
of its loop is kept, the minimum per setting. Printed per setting: that
time, its ratio to no perf and to CPU-only recording, the switches per
second perf saw (the switch-out records of the run), and perf.data's size.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

from ljperf.perfcmd import perf_argv, record_argv

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "offcpu", "pingpong.lua")


def run(argv):
    """(the loop's elapsed seconds, checksum) of one run."""
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        sys.exit("bench.offcpu: %s failed: %s" % (" ".join(argv), r.stderr[-300:]))
    got = dict(ln.split() for ln in r.stdout.splitlines() if len(ln.split()) == 2)
    return float(got["elapsed"]), got["checksum"]


def switch_outs(tmp, data):
    """Switch-out records in DATA."""
    r = subprocess.run(perf_argv("perf", tmp, "script", "-i", data, "-F", "tid",
                                 "--show-switch-events"),
                       capture_output=True, text=True)
    return r.stdout.count("PERF_RECORD_SWITCH OUT")


def calibrate(luajit, trips, rate):
    """WORK (inner iterations between round trips) for about RATE switches/s:
    a round trip's time is linear in WORK, fitted from two runs."""
    base, _ = run([luajit, PROG, str(trips), "0"])
    probe = 20000
    t, _ = run([luajit, PROG, str(trips), str(probe)])
    per_work = max(1e-12, (t - base) / trips / probe)
    want = 2.0 / rate                   # seconds per round trip
    return max(0, int((want - base / trips) / per_work))


def main(argv=None):
    p = argparse.ArgumentParser(prog="bench.offcpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--luajit", default=os.path.join("build", "bin", "luajit"))
    p.add_argument("--rate", type=float, default=10000.0, help="switches/s (default 10000)")
    p.add_argument("--seconds", type=float, default=2.0, help="length of one run")
    p.add_argument("--rounds", type=int, default=5)
    o = p.parse_args(argv)
    if not os.path.exists(o.luajit):
        sys.exit("bench.offcpu: no %s (build first, or --luajit)" % o.luajit)
    trips = int(o.rate / 2 * o.seconds)
    work = calibrate(o.luajit, trips, o.rate)
    prog = [o.luajit, PROG, str(trips), str(work)]
    tmp = tempfile.mkdtemp(prefix="bench-offcpu-")
    env = dict(os.environ, LUAJIT_PERF="1", LUAJIT_PERF_DIR=tmp)
    data = os.path.join(tmp, "perf.data")
    settings = {
        "no perf": prog,
        "cpu": record_argv("perf", tmp, data, "cpu-clock", 999) + ["--"] + prog,
        "cpu+off-cpu": record_argv("perf", tmp, data, "cpu-clock", 999,
                                   off_cpu=True) + ["--"] + prog,
    }
    best = {k: None for k in settings}
    sums = set()
    extra = {}
    try:
        for i in range(o.rounds):
            order = list(settings) if i % 2 == 0 else list(reversed(list(settings)))
            for k in order:
                r = subprocess.run(settings[k], env=env, stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=600)
                if r.returncode != 0:
                    sys.exit("bench.offcpu: %s failed: %s" % (k, r.stderr[-300:]))
                got = dict(ln.split() for ln in r.stdout.splitlines()
                           if len(ln.split()) == 2)
                el = float(got["elapsed"])
                sums.add(got["checksum"])
                if best[k] is None or el < best[k]:
                    best[k] = el
                    if k != "no perf":
                        extra[k] = (switch_outs(tmp, data) / el, os.path.getsize(data))
    finally:
        # the VM writes /tmp/perf-PID.map whatever LUAJIT_PERF_DIR says: the
        # maps of the runs' processes (each wrote a jitdump here, the forked
        # child too) go with them
        for dump in glob.glob(os.path.join(tmp, "jit-*.dump")):
            pid = os.path.basename(dump)[4:-5]
            if pid.isdigit() and not os.path.exists("/proc/" + pid):
                try:
                    os.unlink("/tmp/perf-%s.map" % pid)
                except OSError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)
    if len(sums) != 1:
        sys.exit("bench.offcpu: the settings printed different checksums: %s" % sums)
    print("pipe ping-pong, %d round trips, work %d, paced for %.0f switches/s; "
          "minimum of %d rounds" % (trips, work, o.rate, o.rounds))
    print("| setting | loop time (s) | vs no perf | vs cpu | switches/s seen | perf.data |")
    print("|---|---|---|---|---|---|")
    for k in settings:
        sw, size = extra.get(k, (None, None))
        print("| %s | %.3f | %.3f | %s | %s | %s |" % (
            k, best[k], best[k] / best["no perf"],
            "%.3f" % (best[k] / best["cpu"]) if k != "no perf" else "",
            "%.0f" % sw if sw else "", "%.1f MB" % (size / 1e6) if size else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
