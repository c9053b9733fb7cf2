-- jit.perf from Lua, with LUAJIT_PERF unset: start at run time describes the
-- code loaded before it, stop ends describing, a restart describes what is
-- live again. Prints "phase NAME T0 T1" (CLOCK_MONOTONIC ns).
--   luajit [-joff] api.lua [ITERATIONS]
local perf = require("jit.perf")
local now = require("clock")
local N = tonumber(arg[1]) or 2000000

local function show(tag)
  local st = perf.status()
  print(string.format("status %s map=%s jitdump=%s frames=%s", tag,
                      tostring(st.map), tostring(st.jitdump), tostring(st.frames)))
end

local function early(n)                 -- line 15: loaded before start
  local s = 0
  for i = 1, n do s = (s + i * 3) % 1000003 end
  return s
end

show("initial")
local r = early(math.floor(N / 4))      -- runs (and compiles) before start
print(string.format("t_start %.0f", now()))
print("start", perf.start())
show("started")
local t0 = now()
r = r + early(N)
print(string.format("phase early %.0f %.0f", t0, now()))
local late = assert(loadstring([[
local function late_fn(n)
  local s = 0
  for i = 1, n do s = (s + i * 5) % 1000003 end
  return s
end
return late_fn]], "=late_chunk"))()
t0 = now()
r = r + late(N)
print(string.format("phase late %.0f %.0f", t0, now()))
print("stop", perf.stop())
show("stopped")
local stopped = assert(loadstring("return function(n) return n + 1 end", "=while_stopped"))()
r = r + stopped(1)
print(string.format("t_restart %.0f", now()))
print("restart", perf.start("map,jitdump"))
show("restarted")
print("bad part", pcall(perf.start, "bogus"))
print("result", r)
