-- FFI callbacks: driver -> caller -> ffilib_each (C) -> cbfn (callback) -> spin.
local ffi = require("ffi")
ffi.cdef[[double ffilib_each(long n, double (*cb)(long));]]
local lib = ffi.load(assert(os.getenv("LJPERF_FFILIB"), "LJPERF_FFILIB not set"))
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function cbfn(i) return spin(20000) + 0 end
local cb = ffi.cast("double (*)(long)", cbfn)
local function caller(n) local r = lib.ffilib_each(n, cb) return r + 0 end
local function driver(rounds) local s = 0 for r = 1, rounds do s = s + caller(10) end return s end
-- Callbacks may not be entered from compiled code.
jit.off(caller) jit.off(driver)
print(driver(tonumber(arg[1]) or 30))
cb:free()
