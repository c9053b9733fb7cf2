#!/usr/bin/env python3
"""The remote switch (docs/remote.md), measured (a benchmark, not a test).

  python3 bench/remote.py rates [--bin-dir build/bin] [--seconds 3]
      tests/remote/prog.lua started without LUAJIT_PERF: iterations/s
      before, during and after `ljperf record -p` (medians of 0.1 s windows)
  python3 bench/remote.py latency [--bin-dir build/bin]
      how long a request takes to be acted on (ack) in programs that
      allocate, that only exit traces, and that spin in one trace or in the
      interpreter without allocating (the worst case: the next safe point
      is the end of the loop)
"""

import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "ljperf"))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import ljremote  # noqa: E402
import ljptest  # noqa: E402  (tmp_files)

# name: (luajit args, program). Each prints "ready" and runs until killed.
LATENCY = {
    "allocates (prog.lua)": ([], None),
    "all compiled, no allocation":
        ([], "local function f(i) if i % 1000 == 0 then return 1 end return 0 end\n"
             "print('ready') io.stdout:flush()\n"
             "local s = 0 while true do for i = 1, 1e7 do s = s + f(i) end end"),
    "one trace, 1e8 iterations per loop":
        ([], "print('ready') io.stdout:flush()\n"
             "while true do local s = 0 for i = 1, 1e8 do s = s + i % 7 end end"),
    "one trace, 1e9 iterations per loop":
        ([], "print('ready') io.stdout:flush()\n"
             "while true do local s = 0 for i = 1, 1e9 do s = s + i % 7 end end"),
    "-joff, no allocation, 1e8 per loop":
        (["-joff"], "print('ready') io.stdout:flush()\n"
                    "while true do local s = 0 for i = 1, 1e8 do s = s + i % 7 end "
                    "local t = {} end"),
}


def start(bindir, args, prog):
    env = dict(os.environ)
    env.pop("LUAJIT_PERF", None)
    env["LUA_CPATH"] = os.path.join(bindir, os.pardir, "tests", "fpchain", "?.so")
    if prog is None:
        cmd = [os.path.join(bindir, "luajit")] + args + \
              [os.path.join(ROOT, "tests", "remote", "prog.lua")]
    else:
        cmd = [os.path.join(bindir, "luajit")] + args + ["-e", prog]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def cleanup(p):
    p.kill()
    p.wait()
    ljptest.remove_tmp_files([p.pid])


def latency(opts):
    for name, (args, prog) in LATENCY.items():
        p = start(opts.bin_dir, args, prog)
        time.sleep(1.0)
        took = []
        for _ in range(3):
            sw = ljremote.RemoteSwitch([p.pid])
            t0 = time.monotonic()
            sw.start()
            late = sw.wait_on(timeout=15)
            took.append(time.monotonic() - t0 if not late else float("inf"))
            sw.stop()
            time.sleep(0.5)
        print("%-38s switch-on latency: %s" % (name, ", ".join(
            "%.3f s" % x if x != float("inf") else "none in 15 s" for x in took)))
        sys.stdout.flush()
        cleanup(p)


def rates(opts):
    p = start(opts.bin_dir, [], None)
    lines = []

    def pump(until):
        while time.monotonic() < until:
            ln = p.stdout.readline()
            m = re.search(r"rate=(\d+)", ln)
            if m:
                lines.append((time.monotonic(), int(m.group(1))))

    import threading
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
