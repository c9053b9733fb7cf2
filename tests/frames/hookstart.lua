-- Frame recording switched on by a call hook at the header of the function
-- being called (work): that header must link its record once. The hook's
-- start links every active frame, work's too, so the VM points rbp back at
-- the caller's record before the header runs (->vm_fp_hookhead); else
-- work's record points at itself and perf's unwinder loops through it.
-- Prints "ON ns"/"OFF ns" (CLOCK_MONOTONIC) after each switch.
local perf = require("jit.perf")
local mark = dofile((arg[0]:match("^(.*/)") or "") .. "switchmark.lua")
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function work(n)
  local r = spin(n)
  debug.sethook()
  perf.stop("frames") mark("OFF")
  return r + 0
end
local function hook()
  if debug.getinfo(2, "f").func == work then
    assert(perf.start("frames")) mark("ON")
  end
end
local function driver(rounds)
  local s = 0
  for r = 1, rounds do
    debug.sethook(hook, "c")
    s = s + work(20000) + spin(200000)  -- spin(200000): recording off
  end
  return s
end
print(driver(tonumber(arg[1]) or 100))
