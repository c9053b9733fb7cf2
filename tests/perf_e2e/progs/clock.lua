-- CLOCK_MONOTONIC in nanoseconds (the clock of perf record -k mono), through
-- the FFI: phase boundaries printed by the test programs are compared with
-- perf sample times.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec, tv_nsec; } ljp_timespec;
int clock_gettime(int clk, ljp_timespec *ts);
]]
local ts = ffi.new("ljp_timespec")
return function()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) * 1e9 + tonumber(ts.tv_nsec)
end
