-- Frame recording switched on and off with traces spread over many small
-- MCode areas: a switch flips the patch points of every trace in every
-- area (one protection change per area), not only the current one. Each
-- generated function's loop calls C (tostring: a call patch point), so
-- each of their traces' code differs on from off; off again it is the
-- code it was assembled as. Prints "ok AREAS TRACES".
local perf = require("jit.perf")
local util = require("jit.util")
jit.opt.start("sizemcode=4", "maxmcode=256", "hotloop=2")

local owner, fns = {}, {}
jit.attach(function(what, tr, func)
  if what == "start" then owner[tr] = func end
end, "trace")
for i = 1, 120 do
  fns[i] = assert(loadstring(("return function(n) local s = 0 for j = 1, n do "
    .. "s = s + #tostring(j * %d) end return s end"):format(i)))()
end
local mine = {}
for _, f in ipairs(fns) do mine[f] = true; f(50) end
jit.attach(function() end)

-- The code of every live trace of a generated function, with its area
-- (4 KB areas: the address rounded down).
local function code()
  local t, areas, n = {}, {}, 0
  for tr = 1, 1000 do
    local mc, addr = util.tracemc(tr)
    if mc and mine[owner[tr]] then
      t[tr] = mc
      if not areas[math.floor(addr / 4096)] then
        areas[math.floor(addr / 4096)] = true
        n = n + 1
      end
    end
  end
  return t, n
end

local off, nareas = code()
local ntr = 0
for _ in pairs(off) do ntr = ntr + 1 end
assert(ntr >= 100 and nareas >= 8, ("traces %d in %d areas: too few"):format(ntr, nareas))
for round = 1, 3 do
  assert(perf.start("frames"))
  local on = code()
  for tr, mc in pairs(off) do
    assert(on[tr] and on[tr] ~= mc, ("round %d: trace %d not flipped on"):format(round, tr))
  end
  perf.stop("frames")
  local again = code()
  for tr, mc in pairs(off) do
    assert(again[tr] == mc, ("round %d: trace %d not back off"):format(round, tr))
  end
end
local s = 0
for _, f in ipairs(fns) do s = s + f(50) end
assert(perf.start("frames"))
for _, f in ipairs(fns) do s = s - f(50) end
perf.stop("frames")
assert(s == 0, "the same results while recording")
print("ok", nareas >= 8 and "areas" or nareas, ntr >= 100 and "traces" or ntr)
