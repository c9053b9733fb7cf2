-- Frees waiting for a trap when samples stop: `hold` allocates tables that
-- are then all dropped and collected, and jit.perf.stop("mem") comes right
-- after (what it flushes is the last of their frees). More is allocated
-- after, unsampled. (Not one of hold's tables stays live: hold runs in a
-- coroutine that is gone too.) usage: luajit stopfree.lua
local perf = require("jit.perf")
local held = {}

local function hold(n)
  for i = 1, n do held[i] = {i, i, i, i} end
end

-- In a coroutine, so that no stale stack slot keeps one of them.
coroutine.wrap(hold)(200000)
held = nil
collectgarbage()
collectgarbage()
perf.stop("mem")
local after = {}
for i = 1, 100000 do after[i % 100 + 1] = {i} end
io.write(perf.status().mem and "mem on\n" or "mem off\n")
