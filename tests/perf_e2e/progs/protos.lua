-- One hot loop (chunk protos_main, call K on line 4+K) whose trace inlines
-- NFUNCS functions of NFUNCS chunks (protos_1 ... protos_N), each with a
-- branch of its own (a snapshot in its prototype). Odd ones are closures
-- made often enough that the recorder specialises them to their prototype
-- (no constant function in the snapshot). The trace's lines are the loop's:
-- code of an inlined function has the line of its call. Then a hot loop
-- calling a coroutine.wrap function: snapshots in a fast function's frame,
-- whose PC is no Lua bytecode.
--   luajit protos.lua [NFUNCS] [ITERATIONS]
local NFUNCS = tonumber(arg[1]) or 12
local ITER = tonumber(arg[2]) or 300000
local fs = {}
for k = 1, NFUNCS do
  local src = string.format([[
local add = ...
return function(x)
  if x %% %d == 0 then x = x + add end
  return x + 1
end]], k + 2)
  local make = assert(loadstring(src, "=protos_" .. k))
  fs[k] = make(k)
  if k % 2 == 1 then  -- several closures of one prototype: polymorphic
    for _ = 1, 8 do fs[k] = make(k) end
  end
end
local calls = {}
for k = 1, NFUNCS do calls[#calls + 1] = string.format("s = f[%d](s)", k) end
local loop = assert(loadstring(string.format([[
local f, n = ...
local s = 0
for i = 1, n do
  s = (s + i) %% 1000003
  %s
end
return s]], table.concat(calls, "\n  ")), "=protos_main"))
print("result", loop(fs, ITER))
local co = coroutine.wrap(function(n)
  while true do n = coroutine.yield(n % 7) end
end)
local c = 0
for i = 1, ITER / 10 do c = c + co(i) end
print("coroutine", c)
