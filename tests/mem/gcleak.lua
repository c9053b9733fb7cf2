-- A leak the GC runs beside: three functions allocate, `leaky` keeps every
-- tenth of its tables for good (in `kept`), `churn` and `scratch` drop all
-- theirs. Nothing collects before the end: the recording ends wherever the
-- GC happens to be. With "measure", it then prints the bytes the kept
-- tables take, and `kept`'s own array part (the VM's count: full
-- collections, which a recorded run must not make).
-- usage: luajit gcleak.lua [measure]
local ROUNDS = 1500000
local kept = {}

local function leaky(i)
  local t = {i, i, i, i}
  if i % 10 == 0 then kept[#kept + 1] = t end
  return t
end

local function churn(i)
  return {i, i, i, i, i, i, i, i}
end

local function scratch(i)
  return "scratch-" .. i
end

for i = 1, ROUNDS do
  leaky(i)
  churn(i)
  scratch(i)
end
if arg and arg[1] == "measure" then
  local n = #kept
  collectgarbage()
  local all = collectgarbage("count") * 1024
  local array = {}
  for i = 1, n do array[i] = true end   -- an array part of kept's size
  collectgarbage()
  local witharray = collectgarbage("count") * 1024
  array = nil
  kept = nil
  collectgarbage()
  local rest = collectgarbage("count") * 1024
  io.write(string.format("kept %d tables %d bytes, its array %d bytes\n", n, all - rest,
                         witharray - all))
end
