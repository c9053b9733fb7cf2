-- Method calls via metatables: classes with inheritance and __index chains.
local N = tonumber(arg and arg[1]) or 2000000
local Point = {}
Point.__index = Point
function Point.new(x, y) return setmetatable({ x = x, y = y }, Point) end
function Point:add(o) return Point.new(self.x + o.x, self.y + o.y) end
function Point:dot(o) return self.x * o.x + self.y * o.y end
function Point:scale(k) self.x = self.x * k; self.y = self.y * k; return self end
local Point3 = setmetatable({}, { __index = Point })
Point3.__index = Point3
function Point3.new(x, y, z) local p = Point.new(x, y); p.z = z; return setmetatable(p, Point3) end
function Point3:dot(o) return Point.dot(self, o) + self.z * (o.z or 0) end
local acc = 0
local p, q = Point.new(1, 2), Point3.new(3, 4, 5)
for i = 1, N do
  local r = p:add(q)
  acc = acc + r:dot(p) + q:dot(q) % 7
  if i % 1000 == 0 then p:scale(0.5); acc = acc % 1000003 end
end
print(("checksum %.6f"):format(acc))
