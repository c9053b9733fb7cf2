-- A count hook runs Lua above the hooked function: driver -> work -> hook -> spin.
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function hook() spin(20000) end
local function work(n) local s = 0 for i = 1, n do s = s + i end return s end
local function driver(rounds)
  debug.sethook(hook, "", 5000)
  local s = 0
  for r = 1, rounds do s = s + work(20000) end
  debug.sethook()
  return s
end
print(driver(tonumber(arg[1]) or 300))
