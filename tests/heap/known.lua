-- Known graphs for heap.known (check.py): each case kept from a global of
-- its own, so the checker finds it by name and knows what it must hold.
-- Prints "bytes NAME N" for the cases whose exclusive bytes the GC's own
-- count gives (the retained size the snapshot must show).
local perf = require("jit.perf")
local ffi = require("ffi")
local out = assert(arg[1], "usage: known.lua OUT.heapsnapshot")

local function settle()  -- The GC halves its temp buffer each cycle.
  for _ = 1, 12 do collectgarbage() end
end

local function measured(name, make)
  settle()
  local before = collectgarbage("count")
  local v = make()
  settle()
  print(("bytes %s %d"):format(name, (collectgarbage("count") - before) * 1024))
  return v
end

-- A cycle: two tables that point at each other, kept through one.
CYCLE = measured("CYCLE", function()
  local a, b = {}, {}
  a.partner = b; b.partner = a
  return a
end)

-- String keys made at run time: the table keeps them (a key names the
-- value's edge, and a [key] edge keeps the string).
KEYED = measured("KEYED", function()
  local t = {}
  for i = 1, 50 do t["key-" .. i] = true end
  return t
end)

-- Weak values: the value is kept elsewhere (STRONG), so the weak edge
-- retains nothing.
STRONG = { payload = ("x"):rep(100) }
WEAKV = setmetatable({}, { __mode = "v" })
WEAKV.held = STRONG

-- Weak keys: LuaJIT marks the values of a weak-keyed table strongly.
KEYOBJ = {}
WEAKK = setmetatable({}, { __mode = "k" })
WEAKK[KEYOBJ] = { "value of KEYOBJ" }

-- A suspended coroutine with a local of its own.
SUSPENDED = coroutine.create(function()
  local coro_buffer = { "in the coroutine" }
  coroutine.yield()
  return coro_buffer
end)
assert(coroutine.resume(SUSPENDED))

-- A C closure with an upvalue: coroutine.wrap keeps its coroutine.
WRAPPED = coroutine.wrap(function() coroutine.yield(1) end)

-- FFI cdata with a finalizer, and a named struct.
ffi.cdef("struct hs_point { int x, y; };")
POINT = ffi.new("struct hs_point", 1, 2)
POINTER = ffi.cast("struct hs_point *", POINT)
FINALIZED = ffi.gc(ffi.new("int[4]"), function() end)

-- One string shared by many tables.
SHARED = {}
for i = 1, 20 do SHARED[i] = { tag = "shared-string-value" } end

-- A class by __name, and one by the global holding its metatable.
local Named = { __name = "NamedClass" }
NAMED = setmetatable({}, Named)
GlobalClass = {}
GLOBAL_OBJ = setmetatable({}, GlobalClass)

-- A module whose function keeps a table in an upvalue.
package.loaded.hs_module = (function()
  local M = {}
  local module_cache = measured("module_cache", function()
    local t = {}
    for i = 1, 50 do t[i] = { i } end
    return t
  end)
  function M.get(i) return module_cache[i] end
  return M
end)()

-- __gc objects: the first finalizer to run writes the snapshot, while the
-- second proxy still awaits its finalizer.
local wrote
local function finalizer()
  if not wrote then
    wrote = true
    local n, err = perf.heapsnapshot(out)
    print("snapshot", n, err)
  end
end
do
  for _ = 1, 2 do
    local p = newproxy(true)
    getmetatable(p).__gc = finalizer
  end
end
collectgarbage()
collectgarbage()
assert(wrote, "no finalizer ran")
print("done")
