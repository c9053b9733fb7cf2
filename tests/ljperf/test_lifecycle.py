"""ljperf record with a program that fails, is killed, runs forever
(--duration), ignores SIGTERM, or is stopped with Ctrl-C: the program's
fate is reported in a message and the profile is still written."""

import os
import re
import signal
import subprocess
import sys
import time

from tests.lib import ljptest as t

BUSY = r"""
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long s, ns; } lc_ts;
int clock_gettime(int, lc_ts *);
int raise(int);
void *signal(int, void *);
int poll(void *, unsigned long, int);
]]
local ts = ffi.new("lc_ts")
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.s) + tonumber(ts.ns) * 1e-9 end
local function lifecycle_spin(sec)
  local t0, x = now(), 0
  while now() - t0 < sec do
    for i = 1, 10000 do x = x + i % 3 end
  end
  return x
end
local mode = ...
if mode == "ignore-term" then ffi.C.signal(15, ffi.cast("void *", 1)) end
if mode == "forever" then while true do lifecycle_spin(1) end end
lifecycle_spin(0.8)
if mode == "exit3" then os.exit(3) end
if mode == "term" then ffi.C.raise(15) end
if mode == "ignore-term" or mode == "wait" then
  io.stdout:write("spun\n"); io.stdout:flush()
  while true do ffi.C.poll(nil, 0, 50) end
end
"""


def record(s, luajit, script, mode, extra=()):
    out = s.path("out-" + mode)
    r = s.ljperf(["record", "-o", out, "-F", "499"] + list(extra) +
                 ["--", luajit, script, mode])
    return out, r


def profile_ok(out, what):
    t.check(os.path.isfile(os.path.join(out, "flamegraph.html")) and
            t.has_frame(t.frames_of(t.folded(out)), "lifecycle_spin"),
            what + ": profile written, with the Lua frames")


def gone(out):
    pids = t.meta(out)["pids"]
    return pids and all(not os.path.isdir("/proc/%d" % p) for p in pids)


def test():
    t.need_perf()
    luajit = t.built("bin", "luajit")
    with t.Session() as s:
        script = s.path("busy.lua")
        with open(script, "w") as f:
            f.write(BUSY)

        out, r = record(s, luajit, script, "exit3")
        t.check(r.returncode == 0 and "luajit exited with status 3" in r.stderr,
                "exit status 3 is reported, ljperf exits 0")
        profile_ok(out, "exit 3")

        out, r = record(s, luajit, script, "term")
        t.check(r.returncode == 0 and "luajit was killed by SIGTERM" in r.stderr,
                "death by a signal is reported")
        profile_ok(out, "SIGTERM")

        t0 = time.monotonic()
        out, r = record(s, luajit, script, "forever", ["--duration", "1.5"])
        t.check(r.returncode == 0 and
                re.search(r"luajit stopped after 1\.[5-9] s \(--duration", r.stderr),
                "--duration stops a started program (%.1f s)" % (time.monotonic() - t0))
        profile_ok(out, "--duration")
        t.check(gone(out), "--duration: the program is gone")

        out, r = record(s, luajit, script, "ignore-term", ["--duration", "1.5"])
        t.check(r.returncode == 0 and "it ignored that and was killed" in r.stderr,
                "--duration: a program ignoring SIGTERM is killed")
        profile_ok(out, "ignoring SIGTERM")
        t.check(gone(out), "ignoring SIGTERM: the program is gone")

        # Ctrl-C: SIGINT to the whole foreground process group.
        out = s.path("out-ctrlc")
        cmd = [sys.executable, t.ljperf_bin(), "record", "-o", out, "-F", "499", "--",
               luajit, script, "wait"]
        p = subprocess.Popen(cmd, env=s.env(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        s.procs.append(p)
        t.check(p.stdout.readline().strip() == b"spun", "Ctrl-C: the program runs")
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=120)
        err = err.decode()
        print("  | " + err.replace("\n", "\n  | "))
        s.note_dir_pids(["-o", out])
        t.check(p.returncode == 0 and "recording interrupted (SIGINT)" in err,
                "Ctrl-C: the recording ends, the profile is written")
        profile_ok(out, "Ctrl-C")
        t.check(gone(out), "Ctrl-C: the program is gone")
        for d in ("out-exit3", "out-ctrlc"):
            for pid in t.meta(s.path(d))["pids"]:
                t.check(not os.path.exists("/tmp/perf-%d.map" % pid),
                        "%s: /tmp/perf-%d.map removed" % (d, pid))


if __name__ == "__main__":
    t.main(test)
