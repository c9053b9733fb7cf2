-- Mutual recursion: driver -> a -> b -> a -> b -> a -> b -> spin.
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local a, b
function a(d, n) if d == 0 then return spin(n) + 0 end return b(d - 1, n) + 0 end
function b(d, n) if d == 0 then return spin(n) + 0 end return a(d - 1, n) + 0 end
local function driver(rounds) local s = 0 for r = 1, rounds do s = s + a(5, 20000) end return s end
print(driver(tonumber(arg[1]) or 200))
