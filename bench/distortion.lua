-- Workload of bench/distortion.py: alternates ROUNDS times between a
-- call-heavy Lua function (fib, recursive: one call per node) and C work
-- through the FFI (ffilib_spin from tests/fpchain's libffilib.so), and
-- times each phase itself with the process CPU clock (os.clock).
--
-- usage: luajit distortion.lua FFILIB ROUNDS FIB_N SPIN_N
--        luajit distortion.lua FFILIB calibrate FIB_N
-- Prints `split lua=SECONDS c=SECONDS share=PERCENT checksum=X`: share is
-- the Lua phase's part of the two. `calibrate` prints `spin_n=N`: the
-- SPIN_N that makes one C phase take as long as one fib(FIB_N).
local ffi = require("ffi")
ffi.cdef[[double ffilib_spin(long n);]]
local lib = ffi.load(assert(arg[1], "usage: distortion.lua FFILIB ROUNDS FIB_N SPIN_N"))
local clock = os.clock

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local function calibrate(k)
  local function per_call(f, reps)
    local best = math.huge
    for _ = 1, 5 do
      local t0 = clock()
      for _ = 1, reps do f() end
      best = math.min(best, (clock() - t0) / reps)
    end
    return best
  end
  local tfib = per_call(function() return fib(k) end, 50)
  local tspin = per_call(function() return lib.ffilib_spin(100000) end, 50)
  print(string.format("spin_n=%d", math.max(1, math.floor(100000 * tfib / tspin + 0.5))))
end

local function run(rounds, k, m)
  local tl, tc, sum = 0, 0, 0
  for _ = 1, rounds do
    local t0 = clock()
    local x = fib(k)
    local t1 = clock()
    local y = lib.ffilib_spin(m)
    local t2 = clock()
    tl, tc = tl + (t1 - t0), tc + (t2 - t1)
    sum = sum + x + (y > 0 and 1 or 0)
  end
  print(string.format("split lua=%.6f c=%.6f share=%.3f checksum=%d",
                      tl, tc, 100 * tl / (tl + tc), sum))
end

if arg[2] == "calibrate" then
  calibrate(tonumber(arg[3]))
else
  run(tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4]))
end
