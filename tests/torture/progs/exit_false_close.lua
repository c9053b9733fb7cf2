-- os.exit(false, true): exit status 1 (EXIT_FAILURE) after closing the Lua
-- state, which runs pending __gc finalizers (userdata and cdata) during
-- lua_close. Called from a JIT-hot loop inside a callback-free FFI context.
-- compare: --expect-status 1
local T = dofile("progs/_tlib.lua")
local ffi = require("ffi")
T.section("exit(false, true) runs finalizers at close")
collectgarbage("stop")
local keep = {}
for i = 1, 3 do
  local p = newproxy(true)
  getmetatable(p).__gc = function() io.write("finalizer udata ", i, "\n") end
  keep[i] = p
end
keep.cd = ffi.gc(ffi.new("int[1]", 42), function(c) io.write("finalizer cdata ", c[0], "\n") end)
local s = 0
for i = 1, 100000 do
  s = s + i % 3
  if i == 99999 then
    T.log("sum so far", s)
    os.exit(false, true)
  end
end
print("not reached")
