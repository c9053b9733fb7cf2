-- Interpreter-only work (run with -joff): calls, tables, strings, closures.
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local function tables(n)
  local t = {}
  for i = 1, n do t[i] = { i, tostring(i % 97) } end
  local s = 0
  for i = 1, n do s = s + t[i][1] + #t[i][2] end
  return s
end
local function closures(n)
  local acc = 0
  for i = 1, n do acc = (function(x) return acc + x end)(i) end
  return acc
end
local rounds = tonumber(arg and arg[1]) or 4
local s = 0
for r = 1, rounds do s = s + fib(24) + tables(20000) + closures(50000) end
print(s)
