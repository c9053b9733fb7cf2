-- Run with LUAJIT_PERF unset, empty, 0 or invalid: prints what jit.perf
-- reports, whether a jitdump is mapped, and a result.
local perf = require("jit.perf")
local ffi = require("ffi")
ffi.cdef "int getpid(void);"
print("pid", ffi.C.getpid())
local st = perf.status()
local mapped = false
for line in io.lines("/proc/self/maps") do
  if line:find("jit%-%d+%.dump") then mapped = true end
end
local s = 0
for i = 1, 200000 do s = (s + i) % 1000003 end
print(string.format("map=%s jitdump=%s frames=%s mapped=%s result=%d",
  tostring(st.map), tostring(st.jitdump), tostring(st.frames), tostring(mapped), s))
