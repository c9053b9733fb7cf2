-- Hash tables: string and mixed keys, insert / lookup / update / delete.
local N = tonumber(arg and arg[1]) or 200
local keys = {}
for i = 1, 5000 do keys[i] = "k" .. i * 7919 % 100003 end
local total = 0
for round = 1, N do
  local t = {}
  for i = 1, #keys do t[keys[i]] = i + round end
  for i = 1, #keys, 3 do t[keys[i]] = nil end
  local s = 0
  for i = 1, #keys do local v = t[keys[i]]; if v then s = s + v end end
  for k, v in pairs(t) do s = s + #k end
  t[round] = true; t[round + 0.5] = false
  total = (total + s) % 1000000007
end
print(("checksum %d"):format(total))
