-- JIT-compiled loops: numeric loops, table loops, recursion.
local function sum(n) local s = 0 for i = 1, n do s = s + (i % 7) * 0.5 end return s end
local function fill(n) local t = {} for i = 1, n do t[i] = i * 2 end local s = 0 for i = 1, n do s = s + t[i] end return s end
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local rounds = tonumber(arg and arg[1]) or 6
local s = 0
for r = 1, rounds do s = s + sum(3e6) + fill(2e5) + fib(25) end
print(s)
