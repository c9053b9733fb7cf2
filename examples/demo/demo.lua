-- ljperf demo, Lua side (run by fibdemo). See fibdemo.c.
local ffi = require("ffi")
ffi.cdef[[
int fib_c(int n);
void fib_set_callback(int (*cb)(int));
double fib_c_seconds(void);
typedef struct { long tv_sec, tv_nsec; } demo_timespec;
int clock_gettime(int clk, demo_timespec *ts);
]]
local C = ffi.C
local ts = ffi.new("demo_timespec")
local function now()
  C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local lua_seconds = 0

-- Leaf work in Lua: a fixed amount, timed.
local function lua_work(n)
  local t0 = now()
  local x = n
  for i = 1, 60000 do x = x * 1.0000001 + 1e-9 end
  lua_seconds = lua_seconds + (now() - t0)
  return 1
end

local function fib_lua(n)
  if n < 2 then return lua_work(n) end
  local a = C.fib_c(n - 1)
  local b = C.fib_c(n - 2)
  return a + b
end
-- FFI callbacks may not be entered from JIT-compiled code.
jit.off(fib_lua)

local cb = ffi.cast("int (*)(int)", fib_lua)
C.fib_set_callback(cb)

local function run(seconds)
  local t0, calls, sum = now(), 0, 0
  while now() - t0 < seconds do
    sum = sum + fib_lua(12)
    calls = calls + 1
  end
  local c = C.fib_c_seconds()
  local lua_share = lua_seconds / (lua_seconds + c)
  print(string.format("fibdemo: %d runs of fib(12) = %d", calls, sum / calls))
  print(string.format("measured split: Lua %.1f%%, C %.1f%%",
                      100 * lua_share, 100 * (1 - lua_share)))
end

run(tonumber(... ) or 3)
cb:free()
