-- Frame recording switched on and off 1,000 times while traces run (vm_patch
-- 0007 flips every trace's patch points at each switch): recursion whose
-- traces return below their start frame (RETF), C calls from inlined code
-- (libm, libc and the torture library, stack arguments included), errors
-- thrown inside a trace's C call, coroutines, and traces compiled while
-- recording is on and off. The control VM has no jit.perf: it runs the same
-- work without switching, and the output must be the same.
local T = dofile("progs/_tlib.lua")
local log, eq, msg = T.log, T.eq, T.msg
local ffi = require("ffi")
ffi.cdef [[
int abs(int);
size_t strlen(const char *);
int64_t tl_ints12(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                  int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
]]
local L = ffi.load(assert(os.getenv("TORTURE_FFILIB"), "TORTURE_FFILIB not set"))
local ok, perf = pcall(require, "jit.perf")
if not ok then perf = nil end
local switches = 0
local function flip(i)
  if perf then
    if i % 2 == 1 then perf.start("frames") else perf.stop("frames") end
    switches = switches + 1
  end
end

local sin, floor = math.sin, math.floor
local function leaf(x) return floor(sin(x) * 1000) + ffi.C.abs(x % 7 - 3) end
local function mid(x) return leaf(x) + tonumber(ffi.C.strlen("abc")) end
local function rec(d, x) if d == 0 then return mid(x) end return rec(d - 1, x + 1) + 1 end
local function stack(x)
  return tonumber(L.tl_ints12(x, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11))
end
local function bad(t, x)   -- a NaN key, thrown inside the trace's call to lj_tab_newkey
  t[x] = 1
end

T.section("switches between and inside hot loops")
local acc, errs = 0, 0
for round = 1, 1000 do
  flip(round)
  for i = 1, 60 do
    acc = (acc + rec(6, i) + stack(i)) % 1000003
  end
  if round % 10 == 0 then   -- inside a hot loop: the switch stops the trace
    for i = 1, 40 do
      acc = (acc + mid(i)) % 1000003
      if i == 20 then flip(round + 1); flip(round) end
    end
  end
  if round % 50 == 0 then
    local t = {}
    for i = 1, 30 do
      local okb, e = pcall(bad, t, i == 25 and 0/0 or i + 0.5)  -- float keys: NEWREF calls lj_tab_newkey
      if not okb then errs = errs + 1; acc = acc + #msg(e) end
    end
  end
  if round % 100 == 0 then
    local co = coroutine.wrap(function(n)
      for i = 1, n do coroutine.yield(rec(3, i)) end
    end)
    for _ = 1, 50 do acc = (acc + co(50)) % 1000003 end
  end
  if round % 250 == 0 then jit.flush() end   -- traces recompiled in either mode
end
if perf then perf.stop("frames") end
log("checksum", acc, "errors", errs)
eq(errs, 20, "one NaN key error per 50 rounds")
if perf then eq(switches >= 1000, true, "switched at least 1,000 times") end
