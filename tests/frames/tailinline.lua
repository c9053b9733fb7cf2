-- A tail call at a trace's lowest frame, then a stitch in a frame above it:
-- first's continuation trace (after its own C call) replaces first by
-- callee, which calls inl; inl's call of cmod.spin leaves the trace, whose
-- exit writes the records of inl and of callee, the lowest frame's owner now.
local cmod = require("cmod")
local function inl(n) local s = cmod.spin(n) return s + 1 end
local function callee(n) local r = inl(n) return r + 1 end
local function first(n) local t = os.clock() return callee(n + (t > 0 and 0 or 1)) end
local function driver(rounds) local s = 0 for r = 1, rounds do s = s + first(3000) end return s end
print(driver(tonumber(arg[1]) or 2000) > 0)
