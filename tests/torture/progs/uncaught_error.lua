-- An error nobody catches: the standalone interpreter prints the message and
-- a traceback (through Lua frames, a metamethod, a C function and deep
-- recursion) to stderr and exits with status 1. Expected exit status: 1.
-- The traceback's last line names the interpreter's own C entry function by
-- address ("[C]: at 0x..."), so this test is compared with
-- --mask-c-addresses.
-- compare: --expect-status 1 --mask-c-addresses
local T = dofile("progs/_tlib.lua")
T.section("uncaught error")
io.write("stdout before the error\n")
local function rec(n)
  if n == 0 then
    local t = setmetatable({}, { __index = function(t, k)
      return ("x"):gsub("x", function() local z = nil; return z.field end)
    end })
    return t.key
  end
  return (rec(n - 1))
end
rec(40)
print("not reached")
