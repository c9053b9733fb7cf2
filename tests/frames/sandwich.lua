-- Lua -> C -> Lua -> C: driver -> outer -> cmod.call -> inner -> cmod.spin.
local cmod = require("cmod")
local function inner(n) local r = cmod.spin(n) return r end
local function outer(n) local r = cmod.call(inner, n) return r end
local function driver(rounds) local s = 0 for r = 1, rounds do s = s + outer(100000) end return s end
print(driver(tonumber(arg[1]) or 300) > 0)
