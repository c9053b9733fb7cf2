-- Metamethods run as Lua frames above the code that triggered them:
-- driver -> usemm -> __index / __newindex / __call / __lt (inside
-- table.sort, a C function) -> spin. FFI metatype metamethods (__index,
-- __eq) are tail-called by a C function (lj_meta_tailcall) and replace it.
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local N = 20000
local mt = {
  __index = function(t, k) return spin(N) + 0 end,
  __newindex = function(t, k, v) rawset(t, "last", spin(N) + v) end,
  __call = function(self, x) return spin(N) + x end,
  __lt = function(a, b) spin(math.floor(N / 20)) return a.v < b.v end,
}
local ffi = require("ffi")
ffi.cdef("typedef struct { int v; } ljp_mm_box;")
local box = ffi.metatype("ljp_mm_box", {
  __index = function(c, k) return spin(N) + c.v end,
  __eq = function(a, b) spin(N) return a.v == b.v end,
})
local function usemm(r)
  local o = setmetatable({}, mt)
  local s = o.x + o(1)
  o[r] = 1
  local list = {}
  for i = 1, 6 do list[i] = setmetatable({ v = (i * 7) % 6 }, mt) end
  table.sort(list)
  local b = box(r % 5)
  s = s + b.missing + (b == box(1) and 1 or 0)
  return s
end
local function driver(rounds) local s = 0 for r = 1, rounds do s = s + usemm(r) end return s end
print(driver(tonumber(arg[1]) or 100) > 0)
