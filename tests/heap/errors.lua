-- heap.errors: a snapshot that cannot be written returns nil and one
-- message; the program goes on.
local perf = require("jit.perf")
local t = {}
for i = 1, 20000 do t[i] = { i } end   -- more than 64 KiB of snapshot
print(perf.heapsnapshot(arg[1]))
print(#t == 20000 and "alive" or "broken")
