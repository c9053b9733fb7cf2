-- os.exit(code) from deep inside nested pcalls, a coroutine, a metamethod and
-- a sort comparator. Expected exit status: 3. Output written with io.write
-- (buffered) must be flushed by the exit.
-- compare: --expect-status 3
local T = dofile("progs/_tlib.lua")
T.section("exit from depth")
local function rec(n, f)
  if n == 0 then return f() end
  local ok, e = pcall(rec, n - 1, f)
  io.write("never reached ", n, "\n")
  return ok, e
end
io.stderr:write("stderr before exit\n")
local co = coroutine.wrap(function()
  local t = setmetatable({}, { __index = function(t, k)
    table.sort({ 3, 1, 2 }, function(a, b)
      io.write("in comparator, exiting with 3 (unflushed)")
      os.exit(3)
    end)
  end })
  return rec(150, function() return t.x end)
end)
co()
print("not reached")
