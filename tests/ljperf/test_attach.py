"""ljperf record -p PID: attach to a running patched luajit for --duration
seconds, the process keeps running. Three processes:
  dir     started with LUAJIT_PERF=1 LUAJIT_PERF_DIR=<test dir>
  tmp     started with LUAJIT_PERF=1 only: jitdump in /tmp
  start   no LUAJIT_PERF; the script calls require("jit.perf").start()
"""

import glob
import os
import time

from tests.lib import ljptest as t

SCRIPT = r"""
if START then assert(require("jit.perf").start()) end
local function leaf_sum(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function interp_work(n)          -- stays in the interpreter
  local s = 0
  for i = 1, n do s = s + (i * 3) % 5 end
  return s
end
jit.off(interp_work)
local function attach_busy()
  local t = 0
  for k = 1, 20 do t = t + leaf_sum(20000) + interp_work(2000) end
  return t
end
io.stdout:write("ready\n"); io.stdout:flush()
while true do attach_busy() end
"""


def run_one(s, luajit, script, name, env_extra, dump_dir):
    p = s.start([luajit, "-e", "START = %s" % ("true" if name == "start" else "false"),
                 script], env=s.env(env_extra), stdout=-1)
    t.check(p.stdout.readline().strip() == b"ready", "%s: luajit runs" % name)
    dump = os.path.join(dump_dir, "jit-%d.dump" % p.pid)
    t.check(t.wait_for(lambda: os.path.exists(dump)), "%s: jitdump at %s" % (name, dump))
    time.sleep(0.3)
    out = s.path("out-" + name)
    before = set(glob.glob(os.path.join(dump_dir, "jitted-%d-*.so" % p.pid)))
    r = s.ljperf(["record", "-p", str(p.pid), "--duration", "1.5", "-F", "499", "-o", out])
    t.check(r.returncode == 0, "%s: ljperf record -p exits 0" % name)
    t.check("detached from pid %d after" % p.pid in r.stderr, "%s: says it detached" % name)
    t.check(p.poll() is None, "%s: the process keeps running" % name)
    t.check(os.path.isfile(os.path.join(out, "jit-%d.dump" % p.pid)),
            "%s: its jitdump is copied into DIR" % name)
    t.check(os.path.exists(dump), "%s: its own jitdump is left alone" % name)
    t.check(os.path.isfile(os.path.join(out, "perf-%d.map" % p.pid)) and
            os.path.exists("/tmp/perf-%d.map" % p.pid),
            "%s: its perf map is copied, not removed (it still writes it)" % name)
    left = set(glob.glob(os.path.join(dump_dir, "jitted-%d-*.so" % p.pid))) - before
    t.check(not left, "%s: no jitted-*.so left next to its jitdump (%d)" % (name, len(left)))
    t.check(os.path.isfile(os.path.join(out, "perf.jit.data")), "%s: perf inject ran" % name)
    names = t.frames_of(t.folded(out))
    for want in ("attach_busy", "leaf_sum", "interp_work"):
        t.check(t.has_frame(names, want), "%s: profile has %s" % (name, want))
    t.check(any(n.endswith("_[j]") for n in names), "%s: JIT traces are tagged _[j]" % name)
    t.check(any(n.startswith("leaf_sum@") for n in names) and
            not any(n.startswith("TRACE_") for n in names),
            "%s: traces carry their Lua function's name" % name)
    with open(os.path.join(out, "flamegraph.html")) as f:
        page = f.read()
    t.check("attach_busy@" in page, "%s: flamegraph.html has the Lua frames" % name)
    s.stop(p)


def test():
    t.need_perf()
    luajit = t.built("bin", "luajit")
    with t.Session() as s:
        script = s.path("busy.lua")
        with open(script, "w") as f:
            f.write(SCRIPT)
        dumps = s.path("dumps")
        os.mkdir(dumps)
        run_one(s, luajit, script, "dir", {"LUAJIT_PERF": "1", "LUAJIT_PERF_DIR": dumps}, dumps)
        run_one(s, luajit, script, "tmp", {"LUAJIT_PERF": "1"}, "/tmp")
        run_one(s, luajit, script, "start", {"LUAJIT_PERF_DIR": dumps}, dumps)
        t.check(not os.path.exists(os.path.join(s.home, ".debug")), "nothing written to ~/.debug")
        # A process that is not LuaJIT: the error names where its
        # environment says the jitdump would be.
        p = s.start(["/bin/sleep", "30"], env=s.env({"LUAJIT_PERF_DIR": dumps}))
        r = s.ljperf(["record", "-p", str(p.pid), "--duration", "1", "-o", s.path("o4")])
        t.check(r.returncode == 1 and
                os.path.join(dumps, "jit-%d.dump" % p.pid) in r.stderr,
                "not LuaJIT: the error names $LUAJIT_PERF_DIR/jit-PID.dump")
        s.stop(p)


if __name__ == "__main__":
    t.main(test)
