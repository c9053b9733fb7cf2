-- Tables with many integer and string keys (deterministic keys only),
-- resizing between array and hash parts, next/pairs over sorted key sets,
-- closures and upvalues (shared, closed in loops, nested 10 levels), goto.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

T.section("integer keys")
do
  local t = {}
  for i = 1, 100000 do t[i] = i * 3 end
  log("array", #t, t[1], t[100000])
  for i = 100000, 50001, -1 do t[i] = nil end
  log("shrunk", #t)
  -- sparse and negative integer keys live in the hash part
  local sp = {}
  for i = -5000, 5000, 7 do sp[i] = i end
  local cnt, sum = 0, 0
  for k, v in pairs(sp) do cnt = cnt + 1; sum = sum + v; check(k == v, "k==v") end
  log("sparse", cnt, sum)
  -- float keys that are integers normalize; non-integers are distinct keys
  local f = {}
  f[1] = "int"; f[1.0] = "float-int"; f[1.5] = "float"
  log(f[1], f[1.5], f[2 ^ 53], #f)
  -- table.insert/remove at the front (memmove-like shifting)
  local q = {}
  for i = 1, 2000 do table.insert(q, 1, i) end
  for i = 1, 1000 do table.remove(q, 1) end
  log("insert/remove", #q, q[1], q[#q])
  log(pcall(table.insert, q, 1, 2, 3))
  log(table.remove({}), table.remove({ 1 }, 1), #q)
end

T.section("string keys")
do
  local t = {}
  for i = 1, 50000 do t["key" .. i] = i end
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  log("keys", #keys, keys[1], keys[#keys])
  local sum = 0
  for i = 1, 50000, 3 do t["key" .. i] = nil end
  for k, v in pairs(t) do sum = sum + v end
  log("after delete", sum)
  -- re-insert while iterating is not allowed, but assigning existing keys is
  for k, v in pairs(t) do t[k] = v * 2 end
  sum = 0
  for k, v in pairs(t) do sum = sum + v end
  log("doubled", sum)
  -- next() directly, with invalid key
  log(pcall(next, t, "no such key"))
  log(next({}), type(next({ a = 1 })))
end

T.section("mixed tables, resizing, rehash")
do
  local t = {}
  for i = 1, 20000 do
    if i % 3 == 0 then t[i] = i elseif i % 3 == 1 then t["s" .. i] = i else t[i + 0.5] = i end
  end
  local n, s = 0, 0
  for k, v in pairs(t) do n = n + 1; s = s + v end
  log("mixed", n, s)
  -- boolean keys and table constructors with mixed parts
  local c = { 1, 2, 3, x = 1, [true] = "t", [false] = "f", [10] = 10, "four" }
  log(c[4], c[true], c[false], c[10], #c >= 4)
  -- table.concat / unpack on tables with holes at the end
  local h = { 1, 2, 3, nil, nil }
  log(#h, select("#", unpack(h, 1, 5)))
  -- maxn and getn behaviour
  log(table.maxn({ 1, 2, [10] = 3, [5.5] = 4 }))
end

T.section("closures and upvalues")
do
  -- closures created in a loop capture fresh locals
  local fs = {}
  for i = 1, 1000 do fs[i] = function() return i end end
  local s = 0
  for i = 1, 1000 do s = s + fs[i]() end
  log("loop closures", s)
  -- shared upvalue between closures, updated after the frame returned
  local function counter()
    local n = 0
    return function() n = n + 1; return n end, function() return n end, function(v) n = v end
  end
  local inc, get, set = counter()
  for i = 1, 500 do inc() end
  set(get() * 2)
  log("shared", get())
  -- 10 levels of nested closures, each capturing from all outer levels
  local function nest(a)
    return function(b) return function(c) return function(d) return function(e)
      return function(f) return function(g) return function(h) return function(i)
        return function(j) return a + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8 + i * 9 + j * 10 end
      end end end end end end end end
  end
  log("nested", nest(1)(1)(1)(1)(1)(1)(1)(1)(1)(1), nest(10)(9)(8)(7)(6)(5)(4)(3)(2)(1))
  -- closures over loop variables of while/repeat with break
  local acc = {}
  local k = 0
  while true do
    k = k + 1
    local kk = k
    acc[#acc + 1] = function() return kk * kk end
    if k == 20 then break end
  end
  s = 0
  for i = 1, #acc do s = s + acc[i]() end
  log("while closures", s)
  -- many closures alive, GC in between, upvalues still valid
  local many = {}
  for i = 1, 20000 do
    local a, b = i, tostring(i)
    many[i] = function() return a + #b end
  end
  collectgarbage()
  s = 0
  for i = 1, 20000 do s = s + many[i]() end
  log("many closures", s)
  -- upvalue of a coroutine function modified from outside
  local shared = 0
  local co = coroutine.wrap(function()
    for i = 1, 3 do shared = shared + 10; coroutine.yield(shared) end
  end)
  shared = 5
  log("co upvalue", co(), (function() shared = 100; return co() end)(), co())
end

T.section("goto")
do
  -- continue-style goto
  local s = 0
  for i = 1, 100 do
    if i % 3 == 0 then goto continue end
    s = s + i
    ::continue::
  end
  log("continue", s)
  -- backward goto loop with a closure capturing a local declared in it
  local fns = {}
  local i = 1
  ::top::
  do
    local v = i * 10
    fns[#fns + 1] = function() return v end
  end
  i = i + 1
  if i <= 5 then goto top end
  local out = {}
  for j = 1, #fns do out[j] = fns[j]() end
  log("goto closures", table.concat(out, ","))
  -- nested loops exited with goto
  local found
  for a = 1, 50 do
    for b = 1, 50 do
      if a * b == 391 then found = a .. "x" .. b; goto done end
    end
  end
  ::done::
  log("found", found)
  -- goto in a hot loop (compiled)
  local n = 0
  local j = 0
  ::again::
  j = j + 1
  if j % 2 == 0 then n = n + 1 end
  if j < 100000 then goto again end
  log("hot goto", n)
  -- compile errors for bad gotos
  log(loadstring("goto nowhere"))
  log(loadstring("do local x ::l:: end goto l"))
  log(loadstring("goto f; local x; ::f:: print(x)"))
end

T.done("tables_closures")
