-- Names of functions whose defining chunk is gone: with "late", recording
-- starts (jit.perf.start) after the main chunks of late_mod.lua and
-- late_mod2.lua were collected;
-- without, LUAJIT_PERF=1 names them when loaded. Prints the result.
--   luajit late_names.lua [late]
local m = require("late_mod")
local m2 = require("late_mod2")
local counter = m.make_counter()
local warm = m2.sum(1000)  -- its loop compiled (JFORL in its bytecode) first
collectgarbage(); collectgarbage()
if arg[1] == "late" then assert(require("jit.perf").start()) end
local s = 0
for i = 1, 300 do
  s = s + m.work(12) + m:method(6) + m.assigned(i) + late_global(i)
    + m.Class.new(i):get() + counter() + m2.run(i) + m2.handlers.add(i, 1)
    + m2.sum(100)
end
print(s + warm)
