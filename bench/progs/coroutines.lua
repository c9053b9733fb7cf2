-- Coroutine ping-pong: resume/yield with values in both directions.
local N = tonumber(arg and arg[1]) or 500000
local co = coroutine.create(function(x)
  while true do x = coroutine.yield(x * 3 % 1000003) end
end)
local v, s = 1, 0
for i = 1, N do
  local ok
  ok, v = coroutine.resume(co, v + i)
  s = (s + v) % 1000000007
end
local gen = coroutine.wrap(function()
  for i = 1, N do coroutine.yield(i) end
end)
for i = 1, N do s = (s + gen()) % 1000000007 end
print(("checksum %d"):format(s))
