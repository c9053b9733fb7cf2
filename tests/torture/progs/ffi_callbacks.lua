-- FFI callbacks: Lua functions cast to C function pointers and called from
-- C, with stack arguments, errors unwinding through C frames, C -> Lua -> C
-- nesting (qsort), callbacks at depth and inside coroutines.
--
-- LuaJIT aborts the process ("bad callback") if a callback is entered while
-- a trace runs, i.e. from a C function called by compiled code. Every Lua
-- function below that calls a callback-invoking C function is therefore
-- excluded from compilation with jit.off(f) (which also exercises that API).
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg
local ffi = require("ffi")

ffi.cdef [[
typedef int64_t (*tl_icb)(int64_t, int64_t, int64_t, int64_t, int64_t,
                          int64_t, int64_t, int64_t, int64_t, int64_t);
typedef double (*tl_dcb)(double, double, double, double, double, double,
                         double, double, double, double, int32_t, int32_t);
typedef int (*tl_cb1)(int x);
typedef int (*tl_cmp)(const void *, const void *);
int64_t tl_call_icb(tl_icb cb, int64_t base);
double tl_call_dcb(tl_dcb cb, double base);
int64_t tl_loop_cb(tl_cb1 cb, int n);
int tl_deep_cb(tl_cb1 cb, int depth);
void tl_sort_ints(int32_t *a, size_t n, tl_cmp cmp);
int tl_int_cmp(int32_t a, int32_t b);
void tl_save_cb(tl_cb1 cb);
int tl_call_saved(int x);
]]
local C = ffi.load(assert(os.getenv("TORTURE_FFILIB"), "TORTURE_FFILIB not set"))

local function nojit(f) jit.off(f); return f end

T.section("callbacks with stack arguments")
do
  local icb = ffi.cast("tl_icb", function(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)
    local t = { a1, a2, a3, a4, a5, a6, a7, a8, a9, a10 }
    local s = 0LL
    for i = 1, 10 do s = s + t[i] * i end
    return s
  end)
  local dcb = ffi.cast("tl_dcb", function(d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, i1, i2)
    return d1 + d2 * 2 + d3 * 3 + d4 * 4 + d5 * 5 + d6 * 6 + d7 * 7 + d8 * 8 +
           d9 * 9 + d10 * 10 + i1 * 11 + i2 * 12
  end)
  local run = nojit(function()
    local r1, r2 = 0LL, 0
    for base = 0, 300 do
      r1 = r1 + C.tl_call_icb(icb, base)
      r2 = r2 + C.tl_call_dcb(dcb, base)
    end
    return r1, r2
  end)
  local r1, r2 = run()
  log("icb", tostring(r1), "dcb", r2)
  -- reference
  local w1, w2 = 0, 0
  for base = 0, 300 do
    for i = 1, 10 do w1 = w1 + (base + i) * i; w2 = w2 + (base + i - 0.5) * i end
    w2 = w2 + 11 * 11 + 12 * 12
  end
  eq(tonumber(r1), w1, "icb")
  eq(r2, w2, "dcb")
  icb:free(); dcb:free()
end

T.section("callbacks in a C loop, early stop, hot Lua inside the callback")
do
  local calls = 0
  local cb = ffi.cast("tl_cb1", function(x)
    calls = calls + 1
    local s = 0
    for i = 1, x % 50 do s = s + i end -- a loop that gets compiled inside
    if x == 777 then return -1 end
    return s % 1000
  end)
  local loop = nojit(function(n) return C.tl_loop_cb(cb, n) end)
  log("loop500", tostring(loop(500)))
  log("loop1000 (stops at 777)", tostring(loop(1000)))
  log("calls", calls)
  eq(calls, 500 + 778, "callback calls")
  cb:free()
end

T.section("errors inside callbacks unwind through C frames")
do
  local mode = "ok"
  local cb = ffi.cast("tl_cb1", function(x)
    if mode == "error" then error("callback failed at " .. x)
    elseif mode == "table" then error({ x = x })
    elseif mode == "runtime" then local t; return t[x]
    elseif mode == "deep" then
      local function d(n) if n == 0 then error("deep in callback") end return d(n - 1) + 1 end
      return d(300)
    end
    return x
  end)
  local deep = nojit(function(depth) return C.tl_deep_cb(cb, depth) end)
  local loop = nojit(function(n) return tonumber(C.tl_loop_cb(cb, n)) end)
  for _, m in ipairs({ "ok", "error", "table", "runtime", "deep" }) do
    mode = m
    local ok1, e1 = pcall(deep, 50)
    local ok2, e2 = pcall(loop, 10)
    log(m, ok1, type(e1) == "table" and ("x=" .. e1.x) or msg(e1),
        ok2, type(e2) == "table" and ("x=" .. e2.x) or msg(e2))
  end
  -- many error round trips (each unwinds C frames)
  mode = "error"
  local fails = 0
  for i = 1, 300 do
    if not pcall(deep, i % 20) then fails = fails + 1 end
  end
  log("fails", fails)
  eq(fails, 300, "fails")
  -- after all that the callback still works
  mode = "ok"
  log("after", deep(5))
  cb:free()
end

T.section("qsort: C -> Lua -> C nesting")
do
  local n = 2000
  local arr = ffi.new("int32_t[?]", n)
  local seed = 99
  for i = 0, n - 1 do
    seed = (seed * 1103515245 + 12345) % 2147483648
    arr[i] = seed % 100000
  end
  local ncmp = 0
  local cmp = ffi.cast("tl_cmp", function(pa, pb)
    ncmp = ncmp + 1
    local a = ffi.cast("const int32_t *", pa)[0]
    local b = ffi.cast("const int32_t *", pb)[0]
    return C.tl_int_cmp(a, b) -- back into C from inside the callback
  end)
  local sort = nojit(function(a, k) C.tl_sort_ints(a, k, cmp) end)
  sort(arr, n)
  for i = 1, n - 1 do check(arr[i - 1] <= arr[i], "sorted") end
  local h = 0
  for i = 0, n - 1, 97 do h = T.hash(h, arr[i]) end
  log("qsort", ncmp > n, h)
  -- comparator that sorts a small array itself (qsort inside qsort)
  local inner = ffi.new("int32_t[5]")
  local cmp2 = ffi.cast("tl_cmp", function(pa, pb)
    for i = 0, 4 do inner[i] = (i * 7 + ncmp) % 5 end
    sort(inner, 5)
    local a = ffi.cast("const int32_t *", pa)[0]
    local b = ffi.cast("const int32_t *", pb)[0]
    return a - b
  end)
  local small = ffi.new("int32_t[8]", 5, 3, 8, 1, 9, 2, 7, 4)
  local sort2 = nojit(function() C.tl_sort_ints(small, 8, cmp2) end)
  sort2()
  local out = {}
  for i = 0, 7 do out[#out + 1] = small[i] end
  log("nested qsort", table.concat(out, ","), inner[0], inner[4])
  -- comparator error unwinds through libc's qsort
  local cmp3 = ffi.cast("tl_cmp", function() error("cmp3 fails") end)
  local sort3 = nojit(function() C.tl_sort_ints(small, 8, cmp3) end)
  log(pcall(sort3))
  cmp:free(); cmp2:free(); cmp3:free()
end

T.section("callbacks at Lua depth, in coroutines, saved callbacks")
do
  local cb = ffi.cast("tl_cb1", function(x) return x * 2 end)
  local callit = nojit(function(x) return C.tl_deep_cb(cb, 3) + x end)
  local function rec(n) if n == 0 then return callit(n) end return rec(n - 1) + 1 end
  log("depth", rec(400))
  local co = coroutine.wrap(function()
    local r = callit(1)
    coroutine.yield(r)
    r = callit(2) + rec(100)
    coroutine.yield(r)
    return "end"
  end)
  log("co", co(), co(), co())
  -- yielding from inside a callback is not allowed
  local ycb = ffi.cast("tl_cb1", function(x) coroutine.yield(x); return 0 end)
  local yrun = nojit(function() return C.tl_deep_cb(ycb, 2) end)
  local co2 = coroutine.create(function() return pcall(yrun) end)
  local ok, r1, r2 = coroutine.resume(co2)
  log("yield in cb", ok, r1, msg(r2))
  -- saved callback used later, then replaced
  local k = 10
  local s1 = ffi.cast("tl_cb1", function(x) return x + k end)
  C.tl_save_cb(s1)
  local callsaved = nojit(function(x) return C.tl_call_saved(x) end)
  local acc = 0
  for i = 1, 100 do acc = acc + callsaved(i); k = k + 1 end
  log("saved", acc)
  eq(acc, 5050 + 100 * 10 + 4950, "saved")
  s1:set(function(x) return -x end)
  log("set", callsaved(5))
  C.tl_save_cb(nil)
  log("nil saved", callsaved(5))
  s1:free(); ycb:free(); cb:free()
  -- using a freed callback is an error
  log(pcall(function() return s1(1) end))
end

T.section("callback argument and result conversions")
do
  local dcb = ffi.cast("tl_dcb", function(...)
    local n = select("#", ...)
    local a = { ... }
    return n + a[n] -- i2 = 12
  end)
  local call = nojit(function() return C.tl_call_dcb(dcb, 0) end)
  log("select in cb", call())
  local bad = ffi.cast("tl_cb1", function(x) return "not a number" end)
  local runbad = nojit(function() return C.tl_deep_cb(bad, 1) end)
  log(pcall(runbad))
  dcb:free(); bad:free()
end

T.done("ffi_callbacks")
