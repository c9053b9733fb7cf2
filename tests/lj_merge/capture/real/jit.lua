-- lj_merge fixture workload (tests/lj_merge/capture/capture-real.sh), JIT on.
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
local function concat(n)
  local t = {}
  for i = 1, n do t[#t + 1] = string.format("%d", i) end
  return #table.concat(t)
end
local dur = tonumber(arg and arg[1]) or 0.3
local t0 = os.clock()
while os.clock() - t0 < dur do
  mid(200000)
  concat(2000)
end
