"""ljperf record on a program that loads thousands of functions: perf
inject gets a jitdump cut to the loads the samples hit (one jitted .so per
kept load, not per function), the full dump stays as jit-PID.dump.full, and
nothing is lost: lj_merge resolves the recording to the same stacks from
the full dump as from the cut one, and the hot Lua functions are named."""

import os
import subprocess
import sys

from tests.lib import ljptest as t

CHUNKS, PER = 60, 100     # 6000 functions, each called once

MOD = """local M = {}
%s
function M.hot_%d(n) local s = 0 for i = 1, n do s = (s + i * 7) %% 1013 end return s end
return M
"""
FN = "function M.f%d(x) return x * %d + 1 end\n"
MAIN = """-- load every chunk, call each function once, then spin in a loaded hot_*
local dir, sum, mods = arg[1], 0, {}
for c = 1, %d do
  local M = dofile(dir .. "/mod" .. c .. ".lua")
  for k, f in pairs(M) do if k:sub(1, 1) == "f" then sum = sum + f(c) end end
  mods[c] = M
end
jit.off(mods[42].hot_42)  -- interpreted: its bytecode is in the chains
for r = 1, 20 do sum = sum + mods[7].hot_7(2000000) + mods[42].hot_42(200000) end
print(sum > 0)
"""


def merge(d, script_out, jitdump):
    """lj_merge on SCRIPT_OUT with the given --jitdump: {stack: weight}."""
    lj = os.path.join(t.ROOT, "perf-script", "lj_merge.py")
    r = subprocess.run([sys.executable, lj, "--jitdump", jitdump], input=script_out,
                       capture_output=True, text=True)
    t.check(r.returncode == 0, "lj_merge --jitdump %s runs (%s)"
            % (os.path.basename(jitdump), t.last_line(r.stderr)))
    out = {}
    for line in r.stdout.splitlines():
        s, _, n = line.rpartition(" ")
        out[s] = out.get(s, 0) + int(n)
    return out


def test():
    t.need_perf()
    luajit = t.built("bin", "luajit")
    from ljperf import jitdump
    with t.Session() as s:
        src = s.path("src")
        os.mkdir(src)
        for c in range(1, CHUNKS + 1):
            with open(os.path.join(src, "mod%d.lua" % c), "w") as f:
                f.write(MOD % ("".join(FN % (j, j) for j in range(PER)), c))
        with open(os.path.join(src, "main.lua"), "w") as f:
            f.write(MAIN % CHUNKS)
        out = s.path("out")
        r = s.ljperf(["record", "-o", out, "-F", "999", "--",
                      luajit, os.path.join(src, "main.lua"), src])
        t.check(r.returncode == 0, "ljperf record exits 0")
        pid = t.meta(out)["pids"][0]
        dump = os.path.join(out, "jit-%d.dump" % pid)
        full = dump + ".full"
        t.check(os.path.isfile(full), "the full dump is kept as " + os.path.basename(full))
        nfull = sum(1 for r in jitdump.read(full) if isinstance(r, jitdump.CodeLoad))
        ncut = sum(1 for r in jitdump.read(dump) if isinstance(r, jitdump.CodeLoad))
        t.check(nfull >= CHUNKS * PER, "the full dump describes every function (%d loads)"
                % nfull)
        t.check(0 < ncut < nfull / 10, "perf inject got %d of them" % ncut)
        t.check(jitdump.validate(dump) == [], "the cut dump is a valid jitdump")
        sos = [f for f in os.listdir(out) if f.startswith("jitted-%d-" % pid)]
        t.check(len(sos) <= ncut, "%d jitted .so files for %d loads" % (len(sos), ncut))

        names = t.frames_of(t.folded(out))
        for hot in ("hot_7", "hot_42"):
            t.check(any(n.startswith(("M.%s@" % hot, "M.%s_[j]" % hot, "%s@" % hot))
                        for n in names), "%s is named in the flame graph" % hot)

        # Same samples, resolved once from the full dump and once from the cut.
        r = subprocess.run(["perf", "--buildid-dir", s.path("out", ".debug"), "script",
                            "-i", os.path.join(out, "perf.data"), "-F",
                            "comm,pid,tid,time,period,event,ip,sym,symoff,dso"],
                           capture_output=True, text=True, env=s.env())
        t.check(r.returncode == 0 and r.stdout, "perf script reads perf.data")
        os.mkdir(s.path("fulldir"))
        os.symlink(full, s.path("fulldir", "jit-%d.dump" % pid))
        a = merge(s.dir, r.stdout, s.path("fulldir", "jit-%d.dump" % pid))
        b = merge(s.dir, r.stdout, dump)
        t.check(a == b and len(a) > 5,
                "the cut dump names every sample as the full one does (%d stacks)"
                % len(a))


if __name__ == "__main__":
    t.main(test)
