-- A tail call at a trace's lowest frame, then a stitch there: first's
-- continuation trace (after its own C call) starts at first's base and
-- replaces first by callee, whose call of cmod.spin leaves the trace to the
-- interpreter, which calls it through a continuation in callee's frame.
local cmod = require("cmod")
local function callee(n) local s = cmod.spin(n) return s + 1 end
local function first(n) local t = os.clock() return callee(n + (t > 0 and 0 or 1)) end
local function driver(rounds) local s = 0 for r = 1, rounds do s = s + first(3000) end return s end
print(driver(tonumber(arg[1]) or 2000) > 0)
