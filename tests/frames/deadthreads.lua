-- Frame recording switched on and off while unreachable coroutines (each
-- suspended 9 Lua calls deep) wait for the GC's sweep: the switch links and
-- unlinks the frames of live threads only (a dead one's frames may name
-- functions the sweep already freed). Prints "ok 4501500".
local perf = require("jit.perf")
local function deep(d) if d == 0 then return coroutine.yield(d) end return deep(d - 1) + 1 end
local sum = 0
for r = 1, 3000 do
  for i = 1, 20 do
    local co = coroutine.create(function(n) local t = {} return deep(n) end)
    coroutine.resume(co, 8)  -- suspended 9 frames deep, then dropped
  end
  collectgarbage("step", 1)
  assert(perf.start("frames"))
  perf.stop("frames")
  sum = sum + r
end
print("ok", sum)
