-- Closures: creating closures in loops, calling them, shared upvalues.
local N = tonumber(arg and arg[1]) or 100000
local function make_counter(step)
  local n = 0
  return function() n = n + step; return n end, function() return n end
end
local acc = 0
for i = 1, N do
  local inc, get = make_counter(i % 7 + 1)
  for k = 1, 10 do inc() end
  local add = function(x) return x + get() end
  acc = (acc + add(i)) % 1000000007
end
print(("checksum %d"):format(acc))
