-- Tail calls replace frames; vararg frames are moved: driver -> va(...) ->
-- (tail) tl -> vb(...) -> spin. va and tl's first instance are gone.
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function vb(...) local n = select(1, ...) return spin(n) + 0 end
local function tl(n) return vb(n, 1, 2, 3) end
local function va(...) return tl(...) end
local function driver(rounds) local s = 0 for r = 1, rounds do s = s + va(20000, "x") end return s end
print(driver(tonumber(arg[1]) or 200))
