-- pcall chain with errors: driver -> pcall(p1) -> p1 -> pcall(p2) -> p2 -> spin.
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function p2(n) local r = spin(n) if n % 7 == 0 then error("p2") end return r end
local function p1(n) local ok, r = pcall(p2, n) if not ok then r = 0 end return r + 0 end
local function driver(rounds)
  local s = 0
  for r = 1, rounds do local ok, v = pcall(p1, 20000 + r % 2) s = s + (ok and v or 0) end
  return s
end
print(driver(tonumber(arg[1]) or 200))
