-- FFI calls into the torture C library (ffilib.c): many integer and double
-- arguments (some on the stack), mixed and struct arguments, varargs, all
-- both from the interpreter and from hot (compiled) loops.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg
local ffi = require("ffi")

ffi.cdef [[
int64_t tl_ints12(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                  int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
double tl_doubles12(double, double, double, double, double, double,
                    double, double, double, double, double, double);
double tl_mixed(int8_t c, double d1, int32_t i1, float f1, uint16_t s,
                double d2, int64_t l1, double d3, int32_t i2, double d4,
                uint8_t b, double d5, int64_t l2, float f2, double d6,
                int32_t i3, double d7, int64_t l3, double d8);
typedef struct tl_pair { int32_t a; double b; } tl_pair;
typedef struct tl_big { int64_t v[5]; } tl_big;
double tl_structs(tl_pair p, tl_big big, int32_t k, tl_pair q);
tl_big tl_make_big(int64_t seed);
double tl_sum_varargs(int n, ...);
size_t tl_fill(char *out, size_t n, int seed);
int tl_int_cmp(int32_t a, int32_t b);
]]
local path = assert(os.getenv("TORTURE_FFILIB"), "TORTURE_FFILIB not set")
local L = ffi.load(path)

local function ints12(a) -- reference in Lua
  local s = 0
  for i = 1, 12 do s = s + a[i] * i end
  return s
end

T.section("many integer arguments")
do
  local a = { 1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12 }
  local r = L.tl_ints12(unpack(a))
  log("ints12", tonumber(r), ints12(a))
  eq(tonumber(r), ints12(a), "ints12")
  -- 64-bit values that do not fit in doubles
  local big = L.tl_ints12(0x7fffffffffffLL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1LL)
  log("ints12 64-bit", tostring(big))
  eq(big, 0x7fffffffffffLL + 12LL, "64-bit sum")
end

T.section("many double arguments")
do
  local d = { 0.5, 1.25, -2.5, 3.75, 1e10, -1e-3, 7, 8.5, 9.25, -10.5, 11.125, 12 }
  local r = L.tl_doubles12(unpack(d))
  local want = 0
  for i = 1, 12 do want = want + d[i] * i end
  log("doubles12", string.format("%.6f", r), r == want)
  eq(r, want, "doubles12 exact")
end

T.section("mixed argument classes")
do
  local r = L.tl_mixed(-3, 1.5, 100000, 0.25, 65535, -2.5, 123456789012, 3.25,
                       -7, 4.5, 255, 5.5, -99, 0.5, 6.5, 42, 7.5, 1000, 8.5)
  local want = -3 * 1 + 1.5 * 2 + 100000 * 3 + 0.25 * 4 + 65535 * 5 - 2.5 * 6 +
               123456789012 * 7 + 3.25 * 8 - 7 * 9 + 4.5 * 10 + 255 * 11 + 5.5 * 12 -
               99 * 13 + 0.5 * 14 + 6.5 * 15 + 42 * 16 + 7.5 * 17 + 1000 * 18 + 8.5 * 19
  log("mixed", string.format("%.3f", r), r == want)
  eq(r, want, "mixed")
  -- conversions on the way in: truncation of small integer types
  local r2 = L.tl_mixed(300, 0, 0, 0, 70000, 0, 0, 0, 0, 0, 257, 0, 0, 0, 0, 0, 0, 0, 0)
  log("truncated", r2) -- int8 300 -> 44, uint16 70000 -> 4464, uint8 257 -> 1
  eq(r2, 44 + 4464 * 5 + 1 * 11, "truncation")
end

T.section("struct arguments and returns")
do
  local p = ffi.new("tl_pair", 3, 0.5)
  local q = ffi.new("tl_pair", { a = -4, b = 2.25 })
  local big = L.tl_make_big(7)
  log("make_big", tonumber(big.v[0]), tonumber(big.v[4]))
  local r = L.tl_structs(p, big, 9, q)
  local want = 3 + 0.5 * 2 + 9 * 3 - 4 * 4 + 2.25 * 5
  for i = 0, 4 do want = want + 7 * (i + 1) * (10 + i) end
  log("structs", r)
  eq(r, want, "structs")
end

T.section("varargs C function")
do
  local r = L.tl_sum_varargs(6, ffi.new("int", 1), 2.5, ffi.new("int", 3), 4.5,
                             ffi.new("int", 5), 6.5)
  log("varargs", r)
  eq(r, 1 * 1 + 2.5 * 2 + 3 * 3 + 4.5 * 4 + 5 * 5 + 6.5 * 6, "varargs")
  local buf = ffi.new("char[?]", 64)
  local n = L.tl_fill(buf, 40, 3)
  log("fill", tonumber(n), ffi.string(buf, n))
end

T.section("hot loops with FFI calls (compiled)")
do
  local s1, s2, s3 = 0LL, 0, 0
  for i = 1, 20000 do
    s1 = s1 + L.tl_ints12(i, i + 1, i + 2, i + 3, i + 4, i + 5, i + 6, i + 7,
                          i + 8, i + 9, i + 10, i + 11)
    s2 = s2 + L.tl_doubles12(i, 0.5, i, 0.25, i, 0.125, i, 1, i, 2, i, 4)
    if i % 4 == 0 then
      s3 = s3 + L.tl_mixed(i % 100, i, i, 0.5, i, 1, i, 2, i, 3, i % 256, 4, i, 0.5, 5, i, 6, i, 7)
    end
  end
  log("hot ints", tostring(s1))
  log("hot doubles", string.format("%.1f", s2))
  log("hot mixed", string.format("%.1f", s3))
  -- reference values computed in plain Lua
  local w1 = 0
  for i = 1, 20000 do
    for k = 1, 12 do w1 = w1 + (i + k - 1) * k end
  end
  eq(tonumber(s1), w1, "hot ints")
  -- cmp in a loop with type-changing arguments
  local c = 0
  for i = 1, 5000 do
    local a = (i % 3 == 0) and ffi.new("int32_t", i) or i
    c = c + L.tl_int_cmp(a, 2500)
  end
  log("cmp", c)
  eq(c, -2499 + 2500, "cmp")
end

T.section("conversion errors")
do
  log(pcall(L.tl_ints12, 1, 2, 3))
  log(pcall(L.tl_ints12, {}, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12))
  log(pcall(L.tl_structs, 1, 2, 3, 4))
  log(pcall(function() return L.no_such_symbol end))
  log(pcall(ffi.cdef, "int broken(;"))
  -- errors in a loop after the call site was compiled
  local errs = 0
  for i = 1, 3000 do
    local arg = (i < 2900) and i or "bad"
    local ok = pcall(L.tl_int_cmp, arg, 0)
    if not ok then errs = errs + 1 end
  end
  log("late errors", errs)
  eq(errs, 101, "late errors")
end

T.done("ffi_calls")
