-- lj_merge fixture workload (tests/lj_merge/capture/capture-real.sh):
-- coroutines. Line numbers are part of the expected stacks: keep them.
local function produce(n)
  local s = 0
  for i = 1, n do s = s + i % 3 end
  return s
end
local function producer_body()
  while true do
    local v = produce(3000)
    coroutine.yield(v)
  end
end
local function consume(co, n)
  local t = 0
  for k = 1, n do
    local ok, v = coroutine.resume(co)
    t = t + v
  end
  return t
end
local function crunch(n)
  local s = 0
  for i = 1, n do s = s + i % 5 end
  return s
end
local dur = tonumber(arg and arg[1]) or 0.3
local co = coroutine.create(producer_body)
local t0 = os.clock()
while os.clock() - t0 < dur do
  consume(co, 20)
  crunch(60000)
end
