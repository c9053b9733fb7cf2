-- Stack overflow by a vararg tail call: trees before 2023 grow the stack
-- past LUAI_MAXSTACK without a cap before they raise the error. Frame
-- recording must survive it (its record area covers that growth).
-- Run with LUAJIT_PERF=frames; exits 1 if recording stopped.
local perf = require("jit.perf")
assert(perf.status().frames, "run with LUAJIT_PERF=frames")
local function vtail(...) return vtail(1, ...) end
jit.off(vtail)
for round = 1, 3 do
  -- The error value differs between trees (tarantool/luajit: the handler
  -- gets no message); every tree fails the call.
  local ok = xpcall(vtail, debug.traceback, 1)
  assert(not ok, "expected a stack overflow")
end
local function grow(n, ...) if n == 0 then return select("#", ...) end return grow(n - 1, n, ...) end
local ok = pcall(grow, 1e6)
assert(not ok, "expected a stack overflow")
if not perf.status().frames then
  io.stderr:write("frame recording stopped by a stack overflow\n")
  os.exit(1)
end
print("frames on after stack overflows")
