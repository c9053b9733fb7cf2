-- A trace that stitches in its own frame: loop's trace ends at each call
-- of the lua_CFunction cmod.spin, and the interpreter calls it from loop.
local cmod = require("cmod")
local function loop(n) local s = 0 for i = 1, n do s = s + cmod.spin(300) end return s end
local function driver(rounds) local s = 0 for r = 1, rounds do s = s + loop(1000) end return s end
print(driver(tonumber(arg[1]) or 200) > 0)
