-- lj_merge fixture workload (tests/lj_merge/capture/capture-real.sh).
-- Line numbers are part of the expected stacks: keep them.
local function leaf(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local function mid(n)
  local t = 0
  for k = 1, 4 do t = t + leaf(n) end
  return t
end
local function bytes(s, n)
  local c = 0
  for i = 1, n do c = c + string.byte(s, i % 11 + 1) end
  return c
end
local dur = tonumber(arg and arg[1]) or 0.3
local t0 = os.clock()
while os.clock() - t0 < dur do
  mid(20000)
  bytes("hello world", 20000)
end
