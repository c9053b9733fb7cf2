-- One function keeps what it allocates (a leak into a module-level table),
-- two others allocate as much and more and drop it. With "drop" as the
-- argument the program lets go of the leak (and collects) before it ends.
-- usage: luajit leak.lua [keep|drop]
local leaked = {}

local function leaky(n)
  for i = 1, n do leaked[#leaked + 1] = {i, i, i, i} end
end

local function churn(n)
  local t
  for i = 1, n do t = {i, i, i, i} end
  return t
end

local function scratch(n)
  local s
  for i = 1, n do s = "scratch" .. i end
  return s
end

for _ = 1, 20 do
  leaky(10000)
  churn(40000)
  scratch(40000)
end
collectgarbage()
if arg and arg[1] == "drop" then
  leaked = nil
  collectgarbage()
  collectgarbage()
end
io.write(string.format("kept %d KiB\n", collectgarbage("count")))
