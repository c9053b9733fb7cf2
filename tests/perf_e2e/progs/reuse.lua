-- Prototype (and trace) address reuse: round R loads chunk "=reuse_RRR"
-- defining fn_RRR (all chunks have the same size), runs it hot, drops it,
-- flushes the JIT (traces keep their prototypes alive) and collects
-- garbage, so the next round's prototypes land at the addresses just freed.
--   luajit [-joff] reuse.lua [ITERATIONS] [ROUNDS]
-- Prints "phase R T0 T1" (CLOCK_MONOTONIC ns) around each round's work.
local now = require("clock")
local N = tonumber(arg[1]) or 1000000
local ROUNDS = tonumber(arg[2]) or 6
local src = [[
local function fn_%03d(n)
  local s = 0
  for i = 1, n do s = (s + i * %d) %% 1000003 end
  return s
end
return fn_%03d
]]
-- One round per call: when it returns, no dead slot of the caller's frame
-- still holds the chunk or its function (the GC marks whole frames).
local function round(r)
  local f = assert(loadstring(src:format(r, 100 + r, r), string.format("=reuse_%03d", r)))()
  local t0 = now()
  local x = f(N)
  local t1 = now()
  print(string.format("phase %d %.0f %.0f %d", r, t0, t1, x))
end
for r = 1, ROUNDS do
  round(r)
  jit.flush()
  collectgarbage("collect")
  collectgarbage("collect")
end
