-- Smoke test of a VM built from a prefix of the series (vm_patch/prefixes):
-- calls, tail calls, varargs, closures, metamethods, errors through pcall,
-- coroutines, C calling back into Lua, and loops hot enough to be traced.
-- Every value is checked against one worked out by hand; prints "core ok".
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
assert(fib(20) == 6765)

local function count(n, acc) if n == 0 then return acc end return count(n-1, acc+1) end
assert(count(100000, 0) == 100000)  -- tail calls: no stack growth

local function pack(...) return select("#", ...), ... end
local n, a, b = pack(1, nil, 3)
assert(n == 3 and a == 1 and b == nil)

local function counter() local i = 0; return function() i = i + 1; return i end end
local c = counter(); c(); c()
assert(c() == 3)

local V = setmetatable({}, { __add = function(x, y) return x.v + y.v end,
			     __index = function(_, k) return k * 2 end })
assert(V[21] == 42)
assert(setmetatable({ v = 1 }, getmetatable(V)) + setmetatable({ v = 2 }, getmetatable(V)) == 3)

local ok, err = pcall(function() error({ code = 7 }) end)
assert(not ok and err.code == 7)
ok, err = pcall(function() local t = nil; return t.x end)
assert(not ok and type(err) == "string" and err:find("index", 1, true))
assert(select(2, xpcall(function() error("deep") end, function(m) return "h:" .. m end)):find("h:", 1, true))

local co = coroutine.wrap(function(x)
  for i = 1, 3 do x = x + coroutine.yield(x * i) end
  return "done" .. x
end)
assert(co(1) == 1 and co(1) == 4 and co(1) == 9 and co(1) == "done4")

local t = {}
for i = 1, 200 do t[i] = (i * 7919) % 200 end
table.sort(t, function(x, y) return x > y end)  -- C calls Lua
assert(t[1] == 199 and t[200] == 0)
assert(("a,b,,c"):gsub(",", function() return ";" end) == "a;b;;c")

local s = 0
for i = 1, 1000000 do s = s + i end
assert(s == 500000500000)
local f = 0.0
for i = 1, 100000 do f = f + (i % 3 == 0 and 1.5 or -0.5) end
assert(f == 33333 * 1.5 - 66667 * 0.5)
local u = {}
for i = 1, 50000 do u[#u + 1] = tostring(i % 10) end
assert(#table.concat(u) == 50000)
print("core ok")
