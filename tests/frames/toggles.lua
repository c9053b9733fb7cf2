-- Frame recording switched on and off from inside nested calls and inside
-- coroutines. Prints "ON ns"/"OFF ns" (CLOCK_MONOTONIC) after each switch.
-- The driver's own spin runs with recording off (stacks without Lua frames).
local perf = require("jit.perf")
local mark = dofile((arg[0]:match("^(.*/)") or "") .. "switchmark.lua")
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function a(n) assert(perf.start("frames")) mark("ON") local r = spin(n) return r + 0 end
local function b(n) local r = spin(n) perf.stop("frames") mark("OFF") return r + 0 end
local function cofn(n)
  while true do
    assert(perf.start("frames")) mark("ON")
    local r = spin(n)
    perf.stop("frames") mark("OFF")
    n = coroutine.yield(r + spin(n))
  end
end
-- Switched on inside a coroutine that then yields: back in the driver, c
-- runs with recording still on and must be linked under driver and main.
local function cofn2(n)
  while true do
    assert(perf.start("frames")) mark("ON")
    n = coroutine.yield(n + 0)
  end
end
local function c(n) local r = spin(n) perf.stop("frames") mark("OFF") return r + 0 end
local function driver(rounds)
  local co, co2 = coroutine.wrap(cofn), coroutine.wrap(cofn2)
  local s = 0
  for r = 1, rounds do
    s = s + a(20000) + b(20000) + spin(100000) + co(20000)  -- off: spin(100000)
    s = s + co2(1) + c(20000)
  end
  return s
end
print(driver(tonumber(arg[1]) or 100))
