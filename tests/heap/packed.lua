-- heap.packed (run by heaphost --packed, blocks 8 bytes apart): 17-byte
-- cdata and short strings, many starting in one 32-byte granule; then the
-- GC's count, the addresses of KEEP's cdata, and a snapshot.
local ffi = require("ffi")
local perf = require("jit.perf")
local out = assert(arg[1], "usage: heaphost --packed packed.lua OUT.heapsnapshot")
KEEP, STRS = {}, {}
for i = 1, 5000 do
  KEEP[i] = ffi.new("int8_t", i % 100)
  STRS[i] = "s" .. i
end
collectgarbage()
local count = collectgarbage("count") * 1024
local n = assert(perf.heapsnapshot(out))
print("count", ("%.0f"):format(count), n)
