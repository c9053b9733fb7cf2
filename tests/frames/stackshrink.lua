-- Lua stacks shrunk by the GC while frames are recorded. A collection that
-- traverses a thread whose frames use less than a quarter of its stack
-- halves the stack (lj_state_shrinkstack -> resizestack) under its live
-- frames, whose records must stay linked. Each round:
--   solo:   the running main thread grows deep, then collects at a shallow
--           point (its own stack shrinks), then spins: driver -> solo -> spin
--   worker: three coroutines grow deep and yield from a shallow point; the
--           collections shrink them while suspended; resumed, each spins
--           five calls down: driver -> worker -> wyield -> climb x5 -> spin
--   nested: main resumes outer (A), A resumes inner (B); all three grew;
--           B collects, shrinking itself (running) and A and main (both
--           waiting inside coroutine.resume), then spins, yields, and A
--           spins: driver -> nested -> outer [-> inner] -> spin
-- Every shrink is checked on the stack sizes the VM itself holds
-- (tests/lib/luastack.lua): the program fails if one did not happen.
-- LuaJIT's own allocator shrinks a block in place, so under luajit the
-- frames stay where they were. tests/frames/movehost (global MOVING_ALLOC)
-- moves every block it resizes and counts the shrinks of large blocks
-- (only stacks are large here): each collection must have moved at least
-- the stacks it was meant to shrink.
local S = dofile((arg[0]:match("^(.*)/") or ".") .. "/../lib/luastack.lua")
local DEPTH = 150  -- big() levels per grow, about 150 slots each
local N = 200000   -- spin iterations per piece of work

local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end

-- d+1 frames of ~150 slots; the stack size of thread H at the deepest one.
local function big(d, h)
  local a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, a36, a37, a38, a39, a40, a41, a42, a43, a44, a45, a46, a47, a48, a49, a50, a51, a52, a53, a54, a55, a56, a57, a58, a59, a60, a61, a62, a63, a64, a65, a66, a67, a68, a69, a70, a71, a72, a73, a74, a75, a76, a77, a78, a79, a80, a81, a82, a83, a84, a85, a86, a87, a88, a89, a90, a91, a92, a93, a94, a95, a96, a97, a98, a99, a100, a101, a102, a103, a104, a105, a106, a107, a108, a109, a110, a111, a112, a113, a114, a115, a116, a117, a118, a119, a120, a121, a122, a123, a124, a125, a126, a127, a128, a129, a130, a131, a132, a133, a134, a135, a136, a137, a138, a139, a140, a141, a142, a143, a144, a145, a146, a147, a148, a149 = d, d
  if d == 0 then return S.slots(h) + a0 - a1 end
  return big(d - 1, h) + a1 - a0
end

-- Grows the stack of thread H (running); returns its size at the deepest.
local function grow(h)
  local top = big(DEPTH, h)
  if top < DEPTH * 150 then error("stack grew to only " .. top .. " slots", 0) end
  return top
end

local moves = function() return 0 end
if MOVING_ALLOC then
  local ffi = require("ffi")
  ffi.cdef("unsigned long movehost_big_shrinks;")
  moves = function() return tonumber(ffi.C.movehost_big_shrinks) end
end

-- A full collection traverses every thread twice (propagate, atomic) and
-- halves each stack four times larger than its frames need: three of them
-- shrink a grown stack at least eightfold. THREADS: how many grown stacks
-- the collections must shrink (and, under movehost, move). The collector
-- is stopped in between, so that stacks shrink here and nowhere else.
local function collect(threads)
  local m = moves()
  collectgarbage() collectgarbage() collectgarbage()
  collectgarbage("stop")  -- a full collection restarts it
  if MOVING_ALLOC and moves() - m < threads then
    error("movehost moved " .. moves() - m .. " large blocks, not the " ..
          threads .. " stacks shrunk", 0)
  end
end

local function shrunk(h, top, what)
  local now = S.slots(h)
  if now * 4 > top then
    error(what .. ": stack of " .. top .. " slots not shrunk (" .. now ..
          " after three full collections)", 0)
  end
end

local MAIN = S.main()
collectgarbage("stop")

local function solo(n)
  local top = grow(MAIN)
  collect(1)
  shrunk(MAIN, top, "running main thread")
  local r = spin(n)
  return r
end

local function climb(k, n)
  if k == 0 then local r = spin(n) return r end
  local r = climb(k - 1, n)
  return r
end
local function wyield(top)
  local n = coroutine.yield(top)
  local r = climb(4, n)
  return r
end
local function worker(h)
  local s = 0
  while true do s = s + wyield(grow(h)) end
end

local function inner(hs)
  while true do
    local top = grow(hs.b)
    collect(3)
    shrunk(hs.b, top, "running coroutine")
    shrunk(hs.a, hs.atop, "coroutine waiting in coroutine.resume")
    shrunk(MAIN, hs.mtop, "main thread waiting in coroutine.resume")
    local r = spin(hs.n)
    hs = coroutine.yield(r)
  end
end
local function outer(hs)
  local co = coroutine.create(inner)
  hs.b = S.handle(co)
  while true do
    hs.atop = grow(hs.a)
    local ok, r = coroutine.resume(co, hs)
    if not ok then error(r, 0) end
    r = r + spin(hs.n)
    hs = coroutine.yield(r)
  end
end
local OUTER = coroutine.create(outer)
local HS = { a = S.handle(OUTER) }

local function nested(n)
  HS.n = n
  HS.mtop = grow(MAIN)
  local ok, r = coroutine.resume(OUTER, HS)
  if not ok then error(r, 0) end
  return r
end

local function driver(rounds)
  local workers = {}
  for i = 1, 3 do
    local co = coroutine.create(worker)
    local h = S.handle(co)
    local _, top = coroutine.resume(co, h)
    workers[i] = { co = co, h = h, top = top }
  end
  local s = 0
  for r = 1, rounds do
    s = s + solo(N)
    for _, w in ipairs(workers) do
      shrunk(w.h, w.top, "suspended coroutine")
      local ok, top = coroutine.resume(w.co, N)
      if not ok then error(top, 0) end
      w.top = top
    end
    s = s + nested(N)
  end
  return s
end
print(driver(tonumber(arg[1]) or 20))
