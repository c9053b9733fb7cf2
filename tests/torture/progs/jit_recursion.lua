-- Recursive functions that get compiled: up-recursion (calls), down-
-- recursion (returns through many frames), tail recursion, mutual recursion,
-- recursion with varargs, errors thrown at the bottom of compiled recursion,
-- and recursion mixed with coroutines and pcall.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

T.section("classic recursion")
do
  local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
  log("fib", fib(24))
  eq(fib(24), 46368, "fib")
  local function ack(m, n)
    if m == 0 then return n + 1 end
    if n == 0 then return ack(m - 1, 1) end
    return ack(m - 1, ack(m, n - 1))
  end
  log("ack(2,300)", ack(2, 300), "ack(3,5)", ack(3, 5))
  local function tak(x, y, z)
    if y >= x then return z end
    return tak(tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y))
  end
  log("tak", tak(18, 12, 6))
end

T.section("down-recursion: deep returns through compiled frames")
do
  local function down(n) if n == 0 then return 0 end return 1 + down(n - 1) end
  for _, n in ipairs({ 100, 1000, 5000, 12000, 3, 12000 }) do
    eq(down(n), n, "down " .. n)
  end
  log("down ok")
  -- returning multiple values through many levels
  local function multi(n, a, b)
    if n == 0 then return a, b, a + b end
    local x, y, z = multi(n - 1, b, a + 1)
    return x, y, z
  end
  log("multi", multi(3001, 1, 2))
  -- building a list while returning
  local function build(n)
    if n == 0 then return {} end
    local t = build(n - 1)
    t[#t + 1] = n * n
    return t
  end
  local t = build(4000)
  log("build", #t, t[1], t[4000])
end

T.section("tail recursion")
do
  local function loop(n, acc) if n == 0 then return acc end return loop(n - 1, acc + n % 13) end
  log("tail", loop(1000000, 0))
  local function even(n) if n == 0 then return true end return odd(n - 1) end
  function odd(n) if n == 0 then return false end return even(n - 1) end
  -- (odd is global on purpose: mutual recursion through a global lookup)
  log("even/odd", even(100001), odd(100001), even(40000))
  odd = nil
end

T.section("mutual recursion (non-tail) and varargs recursion")
do
  local isEven, isOdd
  function isEven(n) if n == 0 then return 1 end return isOdd(n - 1) + 0 end
  function isOdd(n) if n == 0 then return 0 end return isEven(n - 1) + 0 end
  log("mutual", isEven(5000), isOdd(5000), isEven(5001))
  local function vsum(n, ...)
    if n == 0 then
      local s = 0
      for i = 1, select("#", ...) do s = s + (select(i, ...)) end
      return s
    end
    return vsum(n - 1, n, ...)
  end
  log("vsum", vsum(200), vsum(250))
  local function count(n, ...)
    if n == 0 then return select("#", ...) end
    return count(n - 1, ...) + 1
  end
  log("count", count(3000, 1, 2, 3))
end

T.section("errors at the bottom of compiled recursion")
do
  local function rec(n, bad)
    if n == 0 then
      if bad then error("bottom reached") end
      return 0
    end
    return rec(n - 1, bad) + 1
  end
  for i = 1, 50 do eq(rec(200, false), 200, "warm") end
  for _, d in ipairs({ 1, 100, 2000 }) do log(d, pcall(rec, d, true)) end
  -- the error happens at a different depth each time, caught at varying levels
  local function guarded(n, failat)
    if n == failat then error({ at = n }) end
    if n == 0 then return 0 end
    if n % 100 == 0 then
      local ok, v = pcall(guarded, n - 1, failat)
      if ok then return v + 1 end
      v.at = v.at + 1000000
      return v.at
    end
    return guarded(n - 1, failat) + 1
  end
  local out = {}
  for _, f in ipairs({ -1, 0, 50, 150, 990 }) do out[#out + 1] = guarded(1000, f) end
  log("guarded", table.concat(out, ","))
  -- stack overflow inside compiled recursion, caught, then normal work
  local function inf(n) return inf(n + 1) + 1 end
  for i = 1, 3 do
    local ok, e = pcall(inf, 0)
    log("overflow", i, ok, T.sov(e))
  end
  eq(rec(5000, false), 5000, "after overflow")
end

T.section("recursion inside coroutines and pcall")
do
  local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
  local co = coroutine.wrap(function()
    for n = 15, 20 do coroutine.yield(fib(n)) end
    return "end"
  end)
  local r = {}
  for i = 1, 7 do r[#r + 1] = co() end
  log("co fib", table.concat(r, ","))
  local function prec(n)
    if n == 0 then return 0 end
    local ok, v = pcall(prec, n - 1)
    return ok and v + 1 or -1
  end
  log("pcall rec", prec(180))
  -- recursion through metamethods (__index function recursing)
  local memo = setmetatable({}, { __index = function(t, n)
    if n < 2 then return n end
    local v = t[n - 1] + t[n - 2]
    rawset(t, n, v)
    return v
  end })
  log("memo", memo[80])
end

T.done("jit_recursion")
