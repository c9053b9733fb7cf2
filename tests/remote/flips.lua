-- Traces that return below their start frame and call C from inlined code
-- (vm_patch 0007), in units of fixed work until STOPFILE exists (or UNITS
-- units are done); prints the units done and their checksum. tests/remote/
-- flips.py switches recording on and off in it remotely meanwhile.
-- usage: luajit flips.lua STOPFILE | luajit flips.lua - UNITS
local ffi = require("ffi")
ffi.cdef [[ int abs(int); size_t strlen(const char *); ]]
local stopfile, units = arg[1], tonumber(arg[2])
local sin, floor = math.sin, math.floor
local function leaf(x) return floor(sin(x) * 1000) + ffi.C.abs(x % 7 - 3) end
local function mid(x) return leaf(x) + tonumber(ffi.C.strlen("abc")) end
local function rec(d, x) if d == 0 then return mid(x) end return rec(d - 1, x + 1) + 1 end
local function unit(u)
  local acc, t = 0, {}
  for i = 1, 2000 do
    acc = (acc + rec(6, i + u)) % 1000003
    t[#t + 1] = { i }          -- garbage: GC steps poll the switch
  end
  return acc
end
print("ready")
io.stdout:flush()
local done, sum = 0, 0
while true do
  if units then
    if done >= units then break end
  elseif done % 20 == 0 then
    local f = io.open(stopfile)
    if f then f:close() break end
  end
  done = done + 1
  sum = (sum + unit(done)) % 1000003
end
print(("units %d checksum %d"):format(done, sum))
