-- Trace exits above a vararg frame: loop's trace inlines mid (vararg) and
-- inner; the stitched call of cmod.spin and a rare side exit both resume
-- the interpreter in inner, with mid's two frame parts and loop below.
local cmod = require("cmod")
local function inner(x)
  if x % 50 == 0 then return cmod.spin(3000) + 1 end  -- side exit
  return cmod.spin(300) + x                              -- stitched call
end
local function mid(...) local r = inner(...) return r + 1 end
local function loop(n) local s = 0 for i = 1, n do s = s + mid(i) end return s end
print(loop(tonumber(arg[1]) or 200000) > 0)
