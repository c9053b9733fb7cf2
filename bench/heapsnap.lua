-- bench/heapsnap.py's program: N live objects (tables, each with a unique
-- string, and a closure per 8), then one snapshot to OUT; prints the
-- snapshot's pause, its node count, the RSS before and at the peak of
-- writing (VmHWM reset through /proc/self/clear_refs), and the file-backed
-- RSS before and after (the writer's code, mapped at its first run).
local ffi = require("ffi")
local perf = require("jit.perf")
ffi.cdef[[
typedef struct { long tv_sec, tv_nsec; } hs_timespec;
int clock_gettime(int clk, hs_timespec *ts);
]]
local n, out = tonumber(arg[1]), arg[2]
local keep = {}
local k = 0
while k < n do
  local t = { name = "object-" .. k }
  keep[#keep + 1] = t
  k = k + 2
  if k % 8 == 0 then keep[#keep + 1] = function() return t end; k = k + 1 end
end
collectgarbage(); collectgarbage()
local function status(field)
  for line in io.lines("/proc/self/status") do
    local v = line:match("^" .. field .. ":%s*(%d+)")
    if v then return tonumber(v) end
  end
end
local f = assert(io.open("/proc/self/clear_refs", "w"))
f:write("5"); f:close()
local rss, file = status("VmRSS"), status("RssFile")
local ts = ffi.new("hs_timespec")
ffi.C.clock_gettime(1, ts)
local t0 = tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
local nodes = assert(perf.heapsnapshot(out))
ffi.C.clock_gettime(1, ts)
local t1 = tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
print(("pause %.4f nodes %d rss_kb %d hwm_kb %d file_kb %d gc_bytes %.0f"):format(
  t1 - t0, nodes, rss, status("VmHWM"), status("RssFile") - file,
  collectgarbage("count") * 1024))
