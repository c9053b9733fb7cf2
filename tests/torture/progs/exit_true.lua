-- os.exit(true) from an xpcall message handler inside a coroutine, with
-- pending pcalls: expected exit status 0 (EXIT_SUCCESS).
local T = dofile("progs/_tlib.lua")
T.section("exit(true) from a message handler")
local co = coroutine.create(function()
  return pcall(function()
    return xpcall(function()
      local function deep(n) if n == 0 then error("trigger") end return deep(n - 1) + 1 end
      return deep(300)
    end, function(m)
      T.log("handler got", T.msg(m))
      io.write("exiting with true\n")
      os.exit(true)
    end)
  end)
end)
print(coroutine.resume(co))
print("not reached")
