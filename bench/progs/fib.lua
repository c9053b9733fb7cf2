-- Recursion: naive Fibonacci (call/return heavy; non-tail calls).
local N = tonumber(arg and arg[1]) or 27
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
local s = 0
for i = N - 4, N do s = s + fib(i) end
print(("checksum %d"):format(s))
