-- heap.totals: a heap of every object kind (traces too), then the GC's own
-- count and a snapshot, with nothing allocated in between.
local perf = require("jit.perf")
local ffi = require("ffi")
local out = assert(arg[1], "usage: totals.lua OUT.heapsnapshot")
local keep = {}
for i = 1, 20000 do            -- loops hot enough to be traces
  keep[i] = { id = i, name = "item" .. i, tags = { i, i * 2 } }
end
local closures = {}
for i = 1, 2000 do
  local up = i
  closures[i] = function() return up end
end
local threads = {}
for i = 1, 50 do
  threads[i] = coroutine.create(function(x) coroutine.yield(x) end)
  coroutine.resume(threads[i], i)
end
local cdata = {}
for i = 1, 1000 do cdata[i] = ffi.new("double[4]", i) end
local udata = {}
for i = 1, 100 do udata[i] = newproxy(true) end
collectgarbage()
local count = collectgarbage("count") * 1024
local n, err = perf.heapsnapshot(out)
assert(n, err)
print("count", ("%.0f"):format(count), n)
