-- Traces that leave inlined frames: loop's trace inlines inl and inl2.
-- Calls of a lua_CFunction (cmod.spin) cannot be compiled: the trace ends
-- there (stitching), and a rarely taken branch becomes a side exit. Both
-- times the interpreter continues inside inl2 with inl and loop below it.
local cmod = require("cmod")
local function inl2(x)
  if x % 50 == 0 then return cmod.spin(3000) + 1 end  -- side exit
  return cmod.spin(300) + x                              -- stitched call
end
local function inl(x) local r = inl2(x) return r + 1 end
local function loop(n) local s = 0 for i = 1, n do s = s + inl(i) end return s end
print(loop(tonumber(arg[1]) or 200000) > 0)
