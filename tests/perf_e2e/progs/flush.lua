-- jit.flush and trace address reuse: round R runs spin_R (its own chunk
-- "=flush_R") hot under the JIT, then flushes every trace, so the traces
-- of round R+1 are compiled into the same machine-code memory.
--   luajit flush.lua [ITERATIONS] [ROUNDS]
-- Prints "phase R T0 T1" (CLOCK_MONOTONIC ns) around each round's work.
local now = require("clock")
local N = tonumber(arg[1]) or 3000000
local ROUNDS = tonumber(arg[2]) or 4
local src = [[
local function spin_%d(n)
  local s = 0
  for i = 1, n do s = (s + i * %d) %% 1000003 end
  return s
end
return spin_%d
]]
for r = 1, ROUNDS do
  local f = assert(loadstring(src:format(r, r + 2, r), "=flush_" .. r))()
  local t0 = now()
  local x = f(N)
  local t1 = now()
  print(string.format("phase %d %.0f %.0f %d", r, t0, t1, x))
  jit.flush()
end
