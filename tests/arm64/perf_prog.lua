-- arm64.perf's program (test_perf.py): prototypes at known lines, traces
-- that inline inner into outer, then every live trace's machine code printed
-- ("trace N ADDR HEX") for the test to hold against the perf map and the
-- jitdump. arg[1] "api": recording is switched by jit.perf from here
-- (LUAJIT_PERF unset): on before the work, off after it, then a chunk
-- loaded while off (late) must not be described.
local api = arg[1] == "api"
local perf = require("jit.perf")
if api then
  local st = perf.status()
  assert(not (st.map or st.jitdump or st.frames), "off before start()")
  assert(perf.start() == true)
  st = perf.status()
  assert(st.map and st.jitdump and st.frames, "start(): map, jitdump, frames")
  assert(not st.mem and not st.remote, "no mem, no remote on arm64")
  assert(not pcall(perf.start, "mem"), "mem is no part on arm64")
end

local function inner(x)
  return x * 3 + 1
end

local function outer(n)
  local s = 0
  for i = 1, n do s = (s + inner(i)) % 1000003 end
  return s
end

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

assert(outer(200000) > 0)
assert(fib(24) == 46368)

local util = require("jit.util")
jit.off()  -- The listing makes no trace (traces stay as they are).
for tr = 1, 65535 do  -- Numbers of traces flushed since leave gaps.
  local mc, addr = util.tracemc(tr)
  if mc then
    print(("trace %d %x %s"):format(tr, addr, (mc:gsub(".", function(c)
      return ("%02x"):format(c:byte()) end))))
  end
end

if api then
  assert(perf.stop() == true)
  local st = perf.status()
  assert(not (st.map or st.jitdump or st.frames), "off after stop()")
  assert(load("local function late() return 1 end return late")()() == 1)
end
print("perf_prog ok")
