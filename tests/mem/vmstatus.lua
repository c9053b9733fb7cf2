-- Run with LUAJIT_PERF=mem and an unusable LUAJIT_PERF_MEMRATE (the VM says
-- so once on stderr and samples at its default rate): jit.perf reports
-- allocation samples on, stops and starts them, and the program's results
-- do not change meanwhile.
local perf = require("jit.perf")
assert(perf.status().mem == true, "LUAJIT_PERF=mem: status().mem")
assert(perf.status().frames == false, "LUAJIT_PERF=mem starts nothing else")
local function work()
  local t, s = {}, 0
  for i = 1, 200000 do t[i % 100 + 1] = {i, tostring(i)} end
  for i = 1, 100 do s = s + t[i][1] end
  return s
end
local a = work()
assert(perf.stop("mem") == true and perf.status().mem == false, "stop(\"mem\")")
local b = work()
assert(perf.start("mem") == true and perf.status().mem == true, "start(\"mem\")")
assert(perf.start("mem") == true, "a second start is a no-op")
local c = work()
assert(a == b and b == c, "the same results with samples on and off")
assert(not pcall(perf.start, "memory"), "an unknown part is an error")
print("ok")
