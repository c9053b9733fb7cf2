-- mark("ON"|"OFF"): prints the word and CLOCK_MONOTONIC in ns, after a
-- program switched frame recording (identity.py judges samples by these).
-- Loaded by the frames programs that switch: dofile(<dir>/switchmark.lua).
local ffi = require("ffi")
ffi.cdef[[typedef struct { long s, ns; } sm_ts; int clock_gettime(int, sm_ts *);]]
local ts = ffi.new("sm_ts")
return function(what)
  ffi.C.clock_gettime(1, ts)
  io.write(what, " ", tostring(ts.s * 1000000000LL + ts.ns):gsub("LL", ""), "\n")
end
