-- heap.gcsteps: with a directory argument, a snapshot after every few
-- allocations over at least two GC cycles (counted by a finalizer that
-- renews itself), so snapshots fall between the steps of every phase
-- (propagate, sweeps, finalizers); the last line is the program's result,
-- the same without snapshots.
local perf = require("jit.perf")
local dir = arg[1]
LIVE = {}
for i = 1, 200 do LIVE[i] = { i, tostring(i) } end
local cycles, sum, it = 0, 0, 0
local function sentinel()
  getmetatable(newproxy(true)).__gc = function() cycles = cycles + 1; sentinel() end
end
sentinel()
collectgarbage("setpause", 100)
collectgarbage("setstepmul", 200)
while cycles < 3 do
  it = it + 1
  for i = 1, 2 do
    local p = newproxy(true)
    getmetatable(p).__gc = function() sum = sum + 1 end
    local g = { i, "g" .. i }
    sum = sum + #g
  end
  if dir then
    assert(perf.heapsnapshot(("%s/%05d.heapsnapshot"):format(dir, it)))
  end
end
local check = 0
for i = 1, #LIVE do check = check + LIVE[i][1] + #LIVE[i][2] end
print(("result %d %d"):format(check, #LIVE))
