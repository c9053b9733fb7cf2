-- Control passing from trace to trace (tests/linked/test_linked.py): each
-- phase's innermost function runs in a trace that other traces jump into,
-- with callers made by those traces. Usage: linked.lua PHASE|all [SCALE]
-- (SCALE: 1 runs each phase about 0.25 s with the JIT; the interpreter's
-- truth run takes less).
local phase, scale = arg[1], tonumber(arg[2]) or 1

-- nested: three loops deep across functions.
local function l3(n)
  local s = 0
  for i = 1, n do s = (s + i * 7) % 1000003 end
  return s
end
local function l2(n)
  local s = 0
  for _ = 1, n do s = s + l3(60) end
  return s
end
local function l1(n)
  local s = 0
  for _ = 1, n do s = s + l2(8) end
  return s
end

-- method: a method's loop calls a method with a loop.
local Obj = {}
Obj.__index = Obj
function Obj:work(n)
  local s = self.k
  for i = 1, n do s = (s + i) % 99991 end
  return s
end
function Obj:step(n)
  local s = 0
  for _ = 1, n do s = s + self:work(50) end
  return s
end
local obj = setmetatable({ k = 3 }, Obj)

-- uprec: a recursion (not a tail call) whose bottom calls a loop.
local function rleaf(n)
  local s = 0
  for i = 1, n do s = (s + i * 3) % 65521 end
  return s
end
local function rec(d, n)
  if d == 0 then return rleaf(n) end
  return rec(d - 1, n) + 1
end
local function recloop(n)
  local s = 0
  for _ = 1, n do s = s + rec(6, 40) end
  return s
end

-- side: a branch that turns hot late gets a side trace, which calls a
-- function with a loop of its own.
local function sidework(n)
  local s = 0
  for i = 1, n do s = (s + i * 5) % 40009 end
  return s
end
local function sideloop(n)
  local s = 0
  for i = 1, n do
    if i % 3 == 0 then s = s + sidework(40) else s = s + 1 end
  end
  return s
end

-- stitch: the leaf's loop calls a C function no trace compiles.
local function stleaf(n)
  local s = 0
  for i = 1, n do s = s + i + collectgarbage("count") * 0 end
  return s
end
local function stitchloop(n)
  local s = 0
  for _ = 1, n do s = s + stleaf(30) end
  return s
end

-- coro: a loop resumes a coroutine whose loop calls a function with a loop.
local function coleaf(n)
  local s = 0
  for i = 1, n do s = (s + i * 11) % 30011 end
  return s
end
local function cobody(n)
  while true do
    local s = 0
    for _ = 1, n do s = s + coleaf(40) end
    n = coroutine.yield(s)
  end
end
local function coloop(n)
  local co = coroutine.wrap(cobody)
  local s = 0
  for _ = 1, n do s = s + co(6) end
  return s
end

local phases = {
  nested = function(k) return l1(k * 200) end,
  method = function(k) return obj:step(k * 2000) end,
  uprec = function(k) return recloop(k * 2000) end,
  side = function(k) return sideloop(k * 6000) end,
  stitch = function(k) return stitchloop(k * 600) end,
  coro = function(k) return coloop(k * 400) end,
}
local order = { "nested", "method", "uprec", "side", "stitch", "coro" }
for _, name in ipairs(order) do
  if phase == "all" or phase == name then
    local run, total = phases[name], 0
    for _ = 1, math.max(1, math.floor(scale * 500)) do total = total + run(1) end
    print(name, total > 0)
  end
end
