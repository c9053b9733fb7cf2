-- Mixed workload with C library functions (lua_CFunction builtins):
-- table.insert/remove/concat, string.format/rep/gsub, tostring/tonumber.
local N = tonumber(arg and arg[1]) or 200000
local t = {}
local acc = 0
for i = 1, N do
  table.insert(t, tostring(i))
  if #t > 50 then
    local s = table.concat(t, ";")
    acc = acc + #s + (tonumber(t[7]) or 0)
    for k = 1, 25 do table.remove(t) end
  end
  local f = string.format("%05d|%s", i % 100000, string.rep("ab", i % 4))
  acc = (acc + #f + #(f:gsub("a", "xy"))) % 1000000007
end
print(("checksum %d"):format(acc))
