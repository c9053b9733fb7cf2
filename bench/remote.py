#!/usr/bin/env python3
"""The remote switch (docs/remote-switch.md), measured (a benchmark, not a test).

  python3 -m bench.remote rates [--bin-dir build/bin] [--seconds 3]
      tests/remote/prog.lua started without LUAJIT_PERF: iterations/s
      before, during and after `ljperf record -p` (medians of 0.1 s windows)
  python3 -m bench.remote latency [--bin-dir build/bin]
      how long a request takes until every Lua state of a program has
      switched on: programs that allocate (a GC step polls), and busy code
      that reaches no poll by itself (tests/remote/busy.lua's loops: the
      interpreter, one trace without exit, sunk allocation, coroutines; the
      C host's two states in two threads), where ljperf kicks
"""

import argparse
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
from ljperf import remote as ljremote
from tests.lib import ljptest  # tmp_files

BUSY = os.path.join(ROOT, "tests", "remote", "busy.lua")
# name: (argv after the bin dir's luajit, or None: the C host). Each prints
# "ready" and runs until killed.
LATENCY = {
    "allocates (prog.lua)": [os.path.join(ROOT, "tests", "remote", "prog.lua")],
    "interpreted loop, no allocation": ["-joff", BUSY, "loop", "1000"],
    "one trace, no exit, no allocation": [BUSY, "loop", "1000"],
    "one trace, sunk allocation": [BUSY, "sunk", "1000"],
    "coroutine ping-pong": [BUSY, "coro", "1000"],
    "count hook, interpreted": ["-joff", BUSY, "hook", "1000"],
    "C host: 2 states, 2 threads, busy": None,
}


def start(bindir, argv, drain=True):
    env = dict(os.environ)
    env.pop("LUAJIT_PERF", None)
    env["LUA_CPATH"] = os.path.join(bindir, os.pardir, "tests", "fpchain", "?.so")
    if argv is None:
        cmd = [os.path.join(bindir, os.pardir, "tests", "remote", "host"), "0", "busy"]
    else:
        cmd = [os.path.join(bindir, "luajit")] + argv
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    if drain:
        threading.Thread(target=p.stdout.read, daemon=True).start()
    return p


def cleanup(p):
    p.kill()
    p.wait()
    ljptest.remove_tmp_files([p.pid])


def latency(opts):
    for name, argv in LATENCY.items():
        p = start(opts.bin_dir, argv)
        time.sleep(1.0)
        took = []
        for _ in range(3):
            sw = ljremote.RemoteSwitch([p.pid])
            t0 = time.monotonic()
            sw.start()
            late = sw.wait_on(timeout=15, every_state=True)
            took.append(time.monotonic() - t0 if not late else float("inf"))
            sw.stop()
            time.sleep(0.5)
        print("%-38s every state on after: %s (kicks: %d)" % (name, ", ".join(
            "%.3f s" % x if x != float("inf") else "none in 15 s" for x in took),
            sum(sw.kicks.values())))
        sys.stdout.flush()
        cleanup(p)


def rates(opts):
    p = start(opts.bin_dir, LATENCY["allocates (prog.lua)"], drain=False)
    lines = []

    def pump(until):
        while time.monotonic() < until:
            ln = p.stdout.readline()
            m = re.search(r"rate=(\d+)", ln)
            if m:
                lines.append((time.monotonic(), int(m.group(1))))

    t = threading.Thread(target=pump, args=(time.monotonic() + 3 * opts.seconds + 60,),
                         daemon=True)
    t.start()
    time.sleep(opts.seconds)
    t0 = time.monotonic()
    out = "/tmp/ljperf-bench-remote-%d" % os.getpid()
    subprocess.run([sys.executable, os.path.join(opts.bin_dir, "ljperf"), "record", "-p",
                    str(p.pid), "--duration", str(opts.seconds), "-o", out],
                   stderr=subprocess.DEVNULL)
    t1 = time.monotonic()
    time.sleep(opts.seconds)
    t2 = time.monotonic()

    def med(a, b):
        xs = sorted(r for tm, r in lines if a <= tm < b)
        return xs[len(xs) // 2] if xs else 0
    print("iterations/s: before %d, during %d, after %d"
          % (med(0, t0), med(t0 + 0.3, t0 + opts.seconds), med(t1 + 0.3, t2)))
    cleanup(p)
    subprocess.run(["rm", "-rf", out])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("rates", "latency"))
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--seconds", type=float, default=3.0)
    opts = ap.parse_args()
    (rates if opts.what == "rates" else latency)(opts)


if __name__ == "__main__":
    main()
