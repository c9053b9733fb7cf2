-- Many traces compiled over time while an old trace stays hot: every
-- compilation flips LuaJIT's machine-code area RW and back RX (mprotect),
-- which perf records as new executable anonymous mappings over the old
-- trace. Samples in old_hot's trace must keep its injected name.
--   luajit mprotect.lua [ITERATIONS] [STEPS]
-- Prints "compiled T" (CLOCK_MONOTONIC ns) once old_hot's trace exists and
-- "steps K" at the end.
local now = require("clock")
local N = tonumber(arg[1]) or 200000
local STEPS = tonumber(arg[2]) or 60
local function old_hot(n)               -- line 11
  local s = 0
  for i = 1, n do s = (s + i * 3) % 1000003 end  -- line 13
  return s
end
local r = old_hot(N)
print(string.format("compiled %.0f", now()))
local src = "local s = 0 for i = 1, 300 do s = (s + i * %d) %% 1000003 end return s"
for k = 1, STEPS do
  r = r + assert(loadstring(src:format(k + 5), "=new_" .. k))()  -- a new trace
  r = r + old_hot(N)
end
print(string.format("steps %d %.0f %d", STEPS, now(), r))
