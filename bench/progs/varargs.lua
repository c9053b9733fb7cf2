-- Varargs: forwarding, select('#'), select(i), table packing.
local N = tonumber(arg and arg[1]) or 1000000
local function count(...) return select("#", ...) end
local function sum(...)
  local s = 0
  for i = 1, select("#", ...) do s = s + (select(i, ...)) end
  return s
end
local function fwd(...) return sum(...) + count(...) end
local function pack(...) return { ... } end
local acc = 0
for i = 1, N do
  acc = acc + fwd(i, 1, 2, 3) + #pack(i, i, i)
  if i % 3 == 0 then acc = acc + fwd(i, 2) end
  acc = acc % 1000000007
end
print(("checksum %d"):format(acc))
