-- FFI calls into a C shared library (from traces unless run with -joff).
local ffi = require("ffi")
ffi.cdef[[double ffilib_spin(long n);]]
local lib = ffi.load(assert(arg[1], "usage: ffi.lua LIBPATH [ROUNDS]"))
local rounds = tonumber(arg[2]) or 2000
local s = 0
for i = 1, rounds do s = s + lib.ffilib_spin(100000) end
print(s > 0)
