-- Broad bytecode and fast-function coverage: every arithmetic and comparison
-- form (variable/number/string/primitive operands), NaN and infinities,
-- numeric for loops with odd steps, constant tables, multi-result table
-- constructors, upvalue stores of each constant kind, 64-bit cdata literals,
-- the bit and math libraries. Run once interpreted-only (jit.off'd copy)
-- and once normally, and both results must agree.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg
local fmt = string.format

local function num(x)
  if x ~= x then return "nan" end
  if x == 1 / 0 then return "inf" end
  if x == -1 / 0 then return "-inf" end
  if x == 0 and 1 / x < 0 then return "-0" end
  return fmt("%.9g", x)
end

local function arith_all(vals, num)
  local out = {}
  for i = 1, #vals do
    local a = vals[i]
    for j = 1, #vals do
      local b = vals[j]
      out[#out + 1] = table.concat({ num(a + b), num(a - b), num(a * b), num(a / b),
        num(a % b), num(a ^ b), tostring(a < b), tostring(a <= b), tostring(a > b),
        tostring(a >= b), tostring(a == b), tostring(a ~= b) }, " ")
    end
    -- constant operand forms (ADDVN, SUBNV, ... ISLT with constants)
    out[#out + 1] = table.concat({ num(a + 2.5), num(2.5 + a), num(a - 3), num(3 - a),
      num(a * -2), num(-2 * a), num(a / 4), num(4 / a), num(a % 3), num(3 % a),
      num(a ^ 2), num(2 ^ a), num(-a), tostring(a < 1), tostring(1 < a),
      tostring(a == 0), tostring(a ~= 0.5) }, " ")
  end
  return out
end

local vals = { 0, -0.0, 1, -1, 2.5, -7.25, 3, 1e15, -2 ^ 52, 0 / 0, 1 / 0, -1 / 0, 1e-310, 2 ^ 31, -2 ^ 31 - 1 }

T.section("arithmetic and comparisons over a value grid")
do
  local r1 = arith_all(vals, num)
  local ref = loadstring(string.dump(arith_all))
  jit.off(ref)
  local ok, r2 = pcall(ref, vals, num)
  local h = 0
  for i = 1, #r1 do h = T.hash(h, r1[i]) end
  log("grid", #r1, h)
  for i = 1, #r1, 37 do log(i, r1[i]) end
  if ok then
    for i = 1, #r1 do eq(r1[i], r2[i], "grid line " .. i) end
  else
    log("reference copy failed", msg(r2))
  end
end

T.section("string coercion and string comparisons")
do
  log("10" + 5, "3" * "4", 10 .. 20, "0x10" + 0, " 7 " * 1, -"2", "1e1" / 2)
  log("a" < "b", "a" < "B", "abc" < "abd", "" < "a", "a\0b" < "a\0c", "Z" <= "Z")
  log(pcall(function() return "a" < 1 end))
  log(pcall(function() return "abc" + 1 end))
  log(1 == "1", "1" ~= 1, 0 == -0)
  local s = "x"
  log(s == "x", s ~= "y", "x" == s, nil == false, not nil, not 0, not not "")
end

T.section("primitives, ISTC/ISFC, nil/false handling")
do
  local n, f, t = nil, false, true
  local a = n or f or "default"
  local b = t and "yes" or "no"
  local c = f and "yes" or "no"
  local d = n and n.x
  log(a, b, c, d, n == nil, f == false, t == true, n ~= f)
  local x, y, z, w = 1
  log(x, y, z, w)
  local k1, k2, k3 = nil, nil, nil
  log(k1 == k2, k3)
end

T.section("numeric for loops")
do
  local function loops()
    local out = {}
    local function run(a, b, c)
      local n, last = 0, nil
      for i = a, b, c do n = n + 1; last = i; if n > 1000 then break end end
      out[#out + 1] = n .. ":" .. tostring(last)
    end
    run(1, 10, 1); run(10, 1, -1); run(1, 0, 1); run(0, 1, 0.25); run(1, 2, 0.1)
    run(-5, 5, 2.5); run(1, 1, -1); run(2 ^ 53 - 3, 2 ^ 53, 1); run(0.1, 0.35, 0.05)
    run(5, -5, -3.5); run(1, 1 / 0, 2 ^ 60)
    return table.concat(out, " ")
  end
  log(loops())
  log(pcall(function() for i = 1, 10, "x" do end end))
  log(pcall(function() for i = {}, 10 do end end))
end

T.section("table constructors, TDUP/TSETM, upvalue stores")
do
  local function mr() return 4, 5, 6 end
  local t1 = { 1, 2, 3, mr() }
  local t2 = { mr(), mr() }
  local t3 = { x = 1, y = "s", [1] = "one", [2.5] = true, mr() }
  log(#t1, t1[6], #t2, t2[2], t3[1], t3[2.5], t3[3])
  local up1, up2, up3, up4
  local function set()
    up1 = "const string"; up2 = 42.5; up3 = true; up4 = nil
    up4 = up1 .. up2
  end
  set()
  log(up1, up2, up3, up4)
  -- a big constant table template used many times
  local function tmpl() return { a = 1, b = 2, c = 3, 1, 2, 3, [10] = 10, nested = { 1 } } end
  local s = 0
  for i = 1, 10000 do local t = tmpl(); s = s + t.a + t[3] + t[10] end
  log("tdup", s)
  -- closures closed by break (UCLO)
  local fns = {}
  for i = 1, 10 do
    local v = i * 3
    fns[#fns + 1] = function() return v end
    if i == 4 then break end
  end
  log("uclo", fns[1](), fns[4](), #fns)
end

T.section("64-bit cdata literals and arithmetic")
do
  local a = 0x7fffffffffffffffLL
  local b = 0xffffffffffffffffULL
  log(tostring(a), tostring(b), tostring(a + 1), tostring(b + 1), tostring(-a - 1))
  log(tostring(10LL / 3), tostring(-10LL % 3), tostring(2LL ^ 62), tostring(3ULL * 5))
  log(a > 0, b > 0, 1LL == 1, tostring(1LL + 0.5))
  log(pcall(function() return 1LL / 0LL end))
  local s = 0LL
  for i = 1, 10000 do s = s + i * 0x100000000LL end
  log(tostring(s))
end

T.section("bit library")
do
  local out = {}
  for _, x in ipairs({ 0, 1, -1, 0x7fffffff, 0x80000000, 0x12345678, 2 ^ 40 + 3, -2 ^ 31 }) do
    out[#out + 1] = table.concat({ bit.tobit(x), bit.bnot(x), bit.band(x, 0xff00ff),
      bit.bor(x, 1), bit.bxor(x, 0x5555), bit.lshift(x, 4), bit.rshift(x, 4),
      bit.arshift(x, 4), bit.rol(x, 7), bit.ror(x, 7), bit.bswap(x), bit.tohex(x) }, " ")
  end
  for i = 1, #out do log(out[i]) end
  log(bit.band(1, 3, 7, 15), bit.bor(1, 2, 4, 8), bit.bxor(1, 3, 7), bit.lshift(1, 33), bit.tohex(-1, 3))
  local s = 0
  for i = 1, 30000 do s = bit.bxor(s, bit.rol(i, i % 31)) + bit.band(i, 7) end
  log("bit loop", s)
end

T.section("math library")
do
  local fns = { "abs", "floor", "ceil", "sqrt", "exp", "log", "log10", "sin", "cos",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "deg", "rad" }
  for _, x in ipairs({ 0, 0.5, -0.5, 1, -1, 2.75, -2.75, 100, 1e-5 }) do
    local out = {}
    for _, f in ipairs(fns) do out[#out + 1] = num(math[f](x)) end
    log(num(x), table.concat(out, " "))
  end
  log(num(math.atan2(1, -1)), num(math.pow(2, 0.5)), num(math.fmod(7, -3)), num(math.fmod(-7, 3)))
  log(num(math.ldexp(0.75, 10)), math.frexp(48), math.modf(-3.75), math.modf(1 / 0))
  log(math.max(1, 5, 3), math.min(4, -2, 9), math.max(-0.0, 0), math.huge, -math.huge, num(math.pi))
  math.randomseed(42)
  local r = {}
  for i = 1, 5 do r[#r + 1] = num(math.random()) end
  for i = 1, 5 do r[#r + 1] = math.random(10) end
  for i = 1, 5 do r[#r + 1] = math.random(-5, 5) end
  log("random", table.concat(r, " "))
  log(pcall(math.random, 2, 1), pcall(math.floor), pcall(math.sqrt, "x"))
  -- hot loop over math functions (compiled, with fallbacks)
  local s = 0
  for i = 1, 20000 do
    local x = i / 100
    s = s + math.floor(x) + math.ceil(-x) + math.abs(-x) + math.sqrt(x) + math.max(x, 50) + math.min(x, 50)
  end
  log("math loop", num(s))
end

T.done("bytecode_ops")
