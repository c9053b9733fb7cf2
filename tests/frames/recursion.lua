-- Recursion depth 8: driver -> rec x9 -> spin (no tail calls).
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function rec(d, n) if d == 0 then return spin(n) + 0 end return rec(d - 1, n) + 0 end
local function driver(rounds) local s = 0 for r = 1, rounds do s = s + rec(8, 20000) end return s end
print(driver(tonumber(arg[1]) or 200))
