-- Lua stacks shrunk by the GC under live frames (lj_state_shrinkstack, when
-- a collection traverses a thread whose frames use under a quarter of its
-- stack): suspended coroutines yielding from under pcall, vararg and
-- metamethod frames with open upvalues; the running main thread; a nested
-- resume chain (the running coroutine and its resumers, waiting inside
-- coroutine.resume); errors, tracebacks, debug.getlocal and regrowth after
-- a shrink. Every shrink is checked on the stack size the VM holds
-- (tests/lib/luastack.lua), so the program fails if one did not happen.
-- The collector is stopped between the explicit collections: stacks shrink
-- only where the program says, whatever the heap.
local T = dofile("progs/_tlib.lua")
local S = dofile("../lib/luastack.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg
local create, resume, yield, status = coroutine.create, coroutine.resume,
  coroutine.yield, coroutine.status

collectgarbage("stop")

-- d+1 frames of 40 slots each; returns the stack size of thread H at the
-- deepest one.
local function big(d, h)
  local a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9,
        c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, e0, e1, e2, e3, e4, e5, e6, e7, e8, e9 = d, d
  if d == 0 then return S.slots(h) + a0 - a1 end
  return big(d - 1, h) + a1 - a0
end
local DEPTH = 400
local function grow(h)
  local top = big(DEPTH, h)
  check(top >= DEPTH * 40, "stack grew")
  return top
end

-- Three full collections halve every stack four times larger than its
-- frames need at least three times; then the collector is stopped again.
local function collect()
  collectgarbage() collectgarbage() collectgarbage()
  collectgarbage("stop")
end

local function shrunk(h, top, what)
  local now = S.slots(h)
  check(now * 4 <= top, what .. ": stack of " .. top .. " slots shrunk to a quarter (now "
        .. now .. ")")
end

local MAIN = S.main()

T.section("suspended coroutine: pcall, vararg and metamethod frames")
do
  local co
  local h
  local mt = {}
  local got = {}
  -- __index yields (from under the metamethod's continuation frame) after
  -- growing the stack: the yield point is shallow, the stack large.
  mt.__index = function(t, k)
    local top = grow(h)
    local v = yield(top)
    got[#got + 1] = k .. "=" .. v
    return v * 2
  end
  local function varf(tag, ...)
    local n, a, b, c = select("#", ...), ...
    local cnt = 0
    local bump = function(x) cnt = cnt + x return cnt end -- open upvalue
    local proxy = setmetatable({}, mt)
    local r = proxy[tag] + bump(1)
    bump(10)
    return r, n, a, b, c, cnt
  end
  local function body(seed)
    local x, y = seed, seed * 3
    local keep = function() return x + y end -- open upvalue on x, y
    local ok, r, n, a, b, c, cnt = pcall(varf, "k" .. seed, seed, "s", { seed })
    x = x + 1
    return ok, r, n, a, b, c[1], cnt, keep()
  end
  co = create(function(...)
    local out = {}
    for round = 1, 3 do out[round] = { body(round * 10) } end
    return out
  end)
  h = S.handle(co)
  local ok, top = resume(co)
  local vals = 0
  while status(co) == "suspended" do
    check(ok, "resume")
    collect()
    shrunk(h, top, "suspended coroutine")
    vals = vals + 1
    ok, top = resume(co, vals * 100)
  end
  check(ok, "coroutine ended")
  for round = 1, 3 do log("round", round, unpack(top[round])) end
  log("metamethod saw", table.concat(got, " "))
  eq(top[3][8], 31 + 90, "upvalues of the yielding frame")
end

T.section("running main thread: open upvalues across the shrink")
do
  local function run(n)
    local acc, list = 0, {}
    local add = function(v) acc = acc + v return acc end
    local top = grow(MAIN)
    for i = 1, n do list[i] = add(i) end
    collect()
    shrunk(MAIN, top, "running main thread")
    for i = 1, n do add(list[i]) end
    return acc
  end
  local s = 0
  for i = 1, 5 do s = s + run(i * 10) end
  log("main sums", s)
end

T.section("nested resume chain: the running coroutine and its resumers")
do
  local HA, HB
  local state = {}
  local inner = create(function(tag)
    for round = 1, 4 do
      local mine = tag .. round
      local top = grow(HB)
      collect()
      shrunk(HB, top, "running coroutine")
      shrunk(HA, state.atop, "coroutine waiting in coroutine.resume")
      shrunk(MAIN, state.mtop, "main thread waiting in coroutine.resume")
      state.tb = T.tb("inner", 1)
      tag = yield(mine)
    end
    return "inner done"
  end)
  local outer = create(function()
    local trail = {}
    local function step(i)
      local here = "o" .. i
      state.atop = grow(HA)
      local ok, v = resume(inner, "t" .. i .. ":")
      check(ok, "inner resume")
      trail[#trail + 1] = here .. "/" .. v
      return here
    end
    for i = 1, 4 do eq(step(i), "o" .. i, "outer frame after shrink") yield(#trail) end
    return table.concat(trail, ",")
  end)
  HA, HB = S.handle(outer), S.handle(inner)
  local function drive()
    local last
    while true do
      state.mtop = grow(MAIN)
      local ok, v = resume(outer)
      check(ok, "outer resume")
      if status(outer) == "dead" then return v end
      last = v
    end
  end
  log("trail", drive())
  log("inner traceback", (state.tb:gsub("\n[^\n]*%[C%][^\n]*", "")))
  log("inner status", status(inner), resume(inner, "t5:"))
end

T.section("errors and tracebacks after a shrink")
do
  local h
  local co = create(function()
    local function deep(n)
      if n == 0 then error({ code = 42 }) end
      return deep(n - 1) + 1
    end
    local function shallow() local top = grow(h) local k = yield(top) return deep(k) end
    local ok, e = pcall(shallow)
    check(not ok and e.code == 42, "error object")
    local top = grow(h)
    yield(top)
    local function fail() local t = nil return t.x end
    local function mid() return fail() + 1 end
    return mid()
  end)
  h = S.handle(co)
  local ok, top = resume(co)
  collect()
  shrunk(h, top, "before a caught error")
  ok, top = resume(co, 3000)  -- regrows by 3000 frames, then unwinds
  check(ok, "caught inside")
  collect()
  shrunk(h, top, "before an uncaught error")
  local ok2, e = resume(co)
  log("uncaught", ok2, msg(e), status(co))
  log("dead traceback", (debug.traceback(co):gsub("0x%x+", "0x?")))
end

T.section("debug.getlocal of a shrunk suspended coroutine")
do
  local h
  local co = create(function(a, b)
    local c = a .. b
    local function lvl2(x)
      local y = x * 7
      local top = grow(h)
      yield(top)
      return x + y
    end
    local r = lvl2(#c)
    return c, r
  end)
  h = S.handle(co)
  local ok, top = resume(co, "ab", "cd")
  check(ok, "first resume")
  collect()
  shrunk(h, top, "suspended coroutine")
  local names = {}
  for level = 0, 3 do
    local info = debug.getinfo(co, level, "Sl")
    if not info then break end
    for i = 1, 8 do
      local name, value = debug.getlocal(co, level, i)
      if not name then break end
      -- (top: a stack size, which the VMs need not share)
      if name:sub(1, 1) ~= "(" and name ~= "top" then
        names[#names + 1] = level .. ":" .. name .. "=" .. T.show(value)
      end
    end
  end
  log("locals", table.concat(names, " "))
  log("end", resume(co))
end

T.section("regrowth: a generator grows and is shrunk 30 times")
do
  local h
  local gen = coroutine.wrap(function()
    h = S.handle(coroutine.running())
    for i = 1, 30 do
      local depth = 50 + (i * 37) % 300
      local s = 0
      local function down(n)
        if n == 0 then return S.slots(h) end
        local v = down(n - 1)
        s = s + n
        return v
      end
      local top = down(depth * 10)
      yield(i, s, top)
    end
  end)
  local total, shrinks = 0, 0
  for _ = 1, 30 do
    local i, s, top = gen()
    total = total + i * s
    collect()
    if S.slots(h) * 4 <= top then shrinks = shrinks + 1 end
  end
  log("generator", total)
  eq(shrinks, 30, "generator stacks shrunk")
  collectgarbage("restart")
end

T.done("stack_shrink")
