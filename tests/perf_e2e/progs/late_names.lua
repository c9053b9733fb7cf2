-- Names of functions whose defining chunk is gone: with "late", recording
-- starts (jit.perf.start) after late_mod.lua's main chunk was collected;
-- without, LUAJIT_PERF=1 names them when loaded. Prints the result.
--   luajit late_names.lua [late]
local m = require("late_mod")
local counter = m.make_counter()
collectgarbage(); collectgarbage()
if arg[1] == "late" then assert(require("jit.perf").start()) end
local s = 0
for i = 1, 300 do
  s = s + m.work(12) + m:method(6) + m.assigned(i) + late_global(i)
    + m.Class.new(i):get() + counter()
end
print(s)
