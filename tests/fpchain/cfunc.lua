-- C functions registered through the Lua C API, called from Lua.
local cmod = require("cmod")
local rounds = tonumber(arg and arg[1]) or 2000
local s = 0
for i = 1, rounds do s = s + cmod.spin(100000) end
print(s > 0)
