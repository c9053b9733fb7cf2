-- __gc finalizers run from the GC, above whatever Lua code allocated:
-- ... -> (GC) -> __gc -> spin.
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function make(r)
  local p = newproxy(true)
  getmetatable(p).__gc = function() spin(20000) end
  return p
end
local function driver(rounds)
  for r = 1, rounds do make(r) if r % 10 == 0 then collectgarbage() end end
end
driver(tonumber(arg[1]) or 2000)
print("done")
