-- Array tables: fill, sieve, sum, insert/remove at the end, sort.
local N = tonumber(arg and arg[1]) or 50
local total = 0
for round = 1, N do
  local n = 100000
  local sieve = {}
  for i = 2, n do sieve[i] = true end
  for i = 2, math.floor(math.sqrt(n)) do
    if sieve[i] then for j = i * i, n, i do sieve[j] = false end end
  end
  local primes = {}
  for i = 2, n do if sieve[i] then primes[#primes + 1] = i end end
  local s = 0
  for i = 1, #primes do s = s + primes[i] % (round + 1) end
  local st = {}
  for i = 1, 20000 do st[#st + 1] = i end
  while #st > 10000 do s = s + table.remove(st) end
  total = (total + s + #primes) % 1000000007
end
print(("checksum %d"):format(total))
