-- stock-VM workload for the luajit-base fixture (interpreter only: -joff)
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local t = os.clock()
while os.clock() - t < 0.3 do fib(20) end
