-- Hot loops that compile to traces and then leave them through side exits:
-- type-unstable values, branches taken rarely then often, guards on
-- metatables/shapes/upvalues failing, exits from inlined calls at depth,
-- allocation sinking with exits, side traces becoming hot.
-- Each loop also runs in a reference form that cannot be compiled
-- (jit.off on the reference function), and results must agree.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

local function both(name, f, ...)
  -- f is a function(...) returning a result string/number. Run it normally
  -- (compiled if the JIT is on) and as an interpreted copy.
  local r1 = f(...)
  local g = loadstring(string.dump(f)) -- same bytecode, separate prototype
  jit.off(g)
  -- (string.dump drops upvalues; the functions here have none)
  local r2 = g(...)
  eq(r1, r2, name .. " compiled vs interpreted")
  log(name, r1)
end

T.section("type-unstable values")
both("int/float/string mix", function(n)
  local s = 0
  for i = 1, n do
    local v
    local m = i % 97
    if m < 60 then v = i elseif m < 80 then v = i + 0.5 elseif m < 95 then v = tostring(i) else v = nil end
    if type(v) == "number" then s = s + v
    elseif type(v) == "string" then s = s + #v
    else s = s - 1 end
  end
  return s
end, 100000)

both("values changing type late", function(n)
  local acc = 0
  local x = 1
  for i = 1, n do
    if i == 60000 then x = 1.5 end
    if i == 80000 then x = "3" end
    if i == 90000 then x = 2 ^ 40 end
    acc = acc + x * 2
  end
  return string.format("%.1f", acc)
end, 100000)

both("table values of changing types", function(n)
  local t = {}
  for i = 1, 100 do t[i] = i end
  local s = 0
  for r = 1, n / 100 do
    if r == 300 then for i = 1, 100, 3 do t[i] = i + 0.25 end end
    if r == 600 then for i = 2, 100, 5 do t[i] = { i } end end
    for i = 1, 100 do
      local v = t[i]
      if type(v) == "table" then s = s + v[1] else s = s + v end
    end
  end
  return string.format("%.2f", s)
end, 100000)

T.section("branches: rare then frequent")
both("branch flip", function(n)
  local a, b = 0, 0
  for i = 1, n do
    if (i < n / 2 and i % 1000 == 0) or (i >= n / 2 and i % 3 ~= 0) then
      a = a + i % 17
    else
      b = b + 1
    end
  end
  return a .. "/" .. b
end, 200000)

both("many exits (switch)", function(n)
  local c = { 0, 0, 0, 0, 0, 0, 0, 0 }
  for i = 1, n do
    local k = (i * 7 + bit.rshift(i, 3)) % 8 + 1
    c[k] = c[k] + (k % 2 == 0 and 1 or 2)
  end
  return table.concat(c, ",")
end, 80000)

T.section("guards on shapes, metatables, upvalues")
both("metatable swapped mid-loop", function(n)
  local mt1 = { __index = function(t, k) return 1 end }
  local mt2 = { __index = function(t, k) return 2 end }
  local o = setmetatable({}, mt1)
  local s = 0
  for i = 1, n do
    if i % 5000 == 0 then setmetatable(o, (i / 5000) % 2 == 0 and mt1 or mt2) end
    s = s + o.x
  end
  return s
end, 100000)

both("table grows from array to hash", function(n)
  local t = {}
  local s = 0
  for i = 1, n do
    t[i] = i
    if i % 1000 == 0 then t["k" .. i] = i; t[i * 1000] = 1 end
    s = s + t[i] + (t["k" .. (i - i % 1000)] or 0)
  end
  return s
end, 60000)

both("global and upvalue changes", function(n)
  local up = 1
  local s = 0
  local function getup() return up end
  for i = 1, n do
    if i % 10000 == 0 then up = up + 1 end
    if i == 50000 then getup = function() return -up end end
    s = s + getup()
  end
  return s
end, 100000)

T.section("exits from inlined calls at depth")
both("deep inlined exit", function(n)
  local function l3(x) if x % 1013 == 0 then return x + 0.5 end return x end
  local function l2(x) return l3(x) + 1 end
  local function l1(x) return l2(x) * 2 end
  local s = 0
  for i = 1, n do s = s + l1(i) end
  return string.format("%.1f", s)
end, 100000)

both("varargs and select in hot loop", function(n)
  local function f(...)
    local k = select("#", ...)
    if k > 2 then return (select(3, ...)) end
    return k
  end
  local s = 0
  for i = 1, n do
    if i % 100 < 50 then s = s + f(i, i) else s = s + f(i, i, i % 7) end
  end
  return s
end, 100000)

T.section("allocation sinking and exits")
both("sunk tables escape on exit", function(n)
  local keep = {}
  local s = 0
  for i = 1, n do
    local p = { x = i, y = i * 2 } -- sinkable
    if i % 9973 == 0 then keep[#keep + 1] = p end -- escapes only on exit
    s = s + p.x + p.y
  end
  local k = 0
  for j = 1, #keep do k = k + keep[j].y end
  return s .. "/" .. #keep .. "/" .. k
end, 100000)

both("sunk closures and strings", function(n)
  local out = {}
  local s = 0
  for i = 1, n do
    local str = "v" .. (i % 10)
    local f = function() return #str + i end
    if i % 20011 == 0 then out[#out + 1] = f end
    s = s + #str
  end
  local k = 0
  for j = 1, #out do k = k + out[j]() end
  return s .. "/" .. k
end, 100000)

T.section("hot exits become side traces; exits with many live values")
both("many live values", function(n)
  local a, b, c, d, e, f, g, h = 1, 2, 3, 4, 5, 6, 7, 8
  local s = 0
  for i = 1, n do
    a = a + 1; b = b + a; c = c + b % 7; d = d + c % 5
    e = e + d % 3; f = f + e % 11; g = g + f % 13; h = h + g % 17
    if i % 3 == 0 then s = s + a - b % 100 end
    if i % 1000 == 999 then a, b = b % 1000, a % 1000 end
  end
  return table.concat({ a, b, c, d, e, f, g, h, s }, ",")
end, 100000)

both("float arithmetic exits", function(n)
  local x, y = 0.0, 1.0
  for i = 1, n do
    x = x + math.sin(i) * 0.001
    if x > 0.01 then x = x - 0.02; y = y * 1.0001 end
    if y ~= y then break end
  end
  return string.format("%.6f %.6f", x, y)
end, 100000)

T.section("exits inside coroutines and pcall")
do
  local r = {}
  local co = coroutine.wrap(function()
    local s = 0
    for i = 1, 100000 do
      s = s + (i % 7 == 0 and 2 or 1)
      if i % 25000 == 0 then coroutine.yield(s) end
    end
    return s
  end)
  for i = 1, 5 do r[#r + 1] = co() end
  log("co exits", table.concat(r, ","))
  local s = 0
  for i = 1, 50000 do
    local ok, v = pcall(function(x) if x % 5000 == 0 then error("e") end return x end, i)
    s = s + (ok and v or -1)
  end
  log("pcall loop", s)
end

T.done("jit_side_exits")
