-- jit.flush, then jit.perf.start: the flushed traces stay in the heap (until
-- a GC cycle frees them) with their machine code gone; the start describes
-- the live traces only. Prints "start RESULT" and "result N".
local function f(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
for _ = 1, 50 do f(1000) end
jit.flush()
print("start", require("jit.perf").start("jitdump"))
print("result", f(100000))
