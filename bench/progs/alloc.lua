-- Allocation/GC heavy: short-lived tables, strings and closures.
local N = tonumber(arg and arg[1]) or 1000000
local keep = {}
local acc = 0
for i = 1, N do
  local t = { i, i * 2, name = "n" .. (i % 1000) }
  local f = function() return t[1] + t[2] end
  acc = (acc + f() + #t.name) % 1000000007
  if i % 1000 == 0 then keep[#keep % 64 + 1] = t end
end
print(("checksum %d %d"):format(acc, #keep))
