-- Smoke test of jit.perf on a VM built from a prefix of the series
-- (vm_patch/prefixes). arg[1]: the last patch applied (3 to 6). Every
-- prefix from 0003 has jit.perf and the map; 0004 adds the remote bit to
-- status(), 0006 the "mem" part (before it, "mem" is an unknown part).
local level = tonumber(arg[1])
local perf = require("jit.perf")
local st = perf.status()
assert(st.map and st.jitdump and st.frames, "LUAJIT_PERF=1: map, jitdump, frames on")
assert(st.remote == false and st.mem == false)
assert(perf.stop("frames") and not perf.status().frames)
assert(perf.start("frames") and perf.status().frames)
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
assert(fib(22) == 17711)
local ok, err = pcall(perf.start, "mem")
if level >= 6 then
  assert(ok and err == true and perf.status().mem, "mem starts")
  local t = {}
  for i = 1, 20000 do t[i] = { i } end
  assert(perf.stop("mem") and not perf.status().mem)
else
  assert(not ok and err:find("unknown part 'mem'", 1, true), "mem is not a part before 0006")
end
assert(not pcall(perf.start, "all"))
print("perf ok")
