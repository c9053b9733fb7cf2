-- Lua stack growth and shrinking, stack overflow caught by pcall, varargs
-- with thousands of values, unpack of large tables, open upvalues that must
-- follow stack reallocation.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

T.section("growth with open upvalues and many locals per frame")
do
  -- Each frame owns closures over its locals; stack reallocations during the
  -- recursion must relocate the open upvalues.
  local getters = {}
  local function grow(n)
    local a, b, c, d, e = n, n * 2, n * 3, tostring(n), { n }
    getters[n] = function() return a + b + c + tonumber(d) + e[1] end
    if n > 0 then
      local r = grow(n - 1)
      a = a + 1 -- modify after the deeper frames (and reallocations) are gone
      return r + getters[n]()
    end
    return 0
  end
  for _, depth in ipairs({ 100, 1000, 2500, 5000 }) do
    getters = {}
    local r = grow(depth)
    -- each getter: (n+1) + 2n + 3n + n + n = 8n + 1 (a was incremented)
    local s = 0
    for n = 1, depth do s = s + getters[n]() end
    log("depth", depth, r, s)
    eq(s, 8 * depth * (depth + 1) / 2 + depth, "getter sum")
  end
end

T.section("stack overflow caught by pcall, repeatedly")
do
  local function inf(n) local x = n + 1; return inf(x) + 1 end
  local function inf2(n, ...) return 1 + inf2(n + 1, n, ...) end -- growing varargs
  for i = 1, 5 do
    local ok, e = pcall(inf, 1)
    check(not ok, "overflow expected")
    log(i, "inf", T.sov(e))
    ok, e = pcall(inf2, 1)
    log(i, "inf2", T.sov(e))
  end
  -- overflow inside xpcall: the handler still runs (with extra stack)
  local hcalls = 0
  local ok, e = xpcall(inf, function(m) hcalls = hcalls + 1; return "H(" .. T.sov(m) .. ")" end, 1)
  -- Whether the handler runs depends on where the overflow is detected (in
  -- the interpreter: yes; in a trace exit: LuaJIT may raise LUA_ERRERR
  -- directly), so only the invariant parts are printed.
  check(type(e) == "string" and e:find("stack overflow", 1, true), "overflow message")
  check(hcalls <= 1, "handler at most once")
  log("xpcall overflow", ok)
  -- a handler that recurses deeply itself after an overflow
  ok, e = xpcall(inf, function(m)
    local function d(n) if n == 0 then return 0 end return 1 + d(n - 1) end
    return d(100)
  end, 1)
  log("deep handler", ok, T.sov(e))
  -- the stack is usable after all of that
  local function sum(n) if n == 0 then return 0 end return n + sum(n - 1) end
  eq(sum(10000), 50005000, "sum after overflow")
  log("sum ok")
end

T.section("shrinking: GC shrinks stacks of idle threads")
do
  local function sum(n) if n == 0 then return 0 end return n + sum(n - 1) end
  local cos = {}
  for i = 1, 20 do
    cos[i] = coroutine.create(function(n)
      while true do
        local r = sum(n)
        n = coroutine.yield(r)
      end
    end)
  end
  local total = 0
  for round = 1, 4 do
    for i = 1, #cos do
      local n = (round % 2 == 1) and (2000 + i * 300) or (i % 5)
      local ok, r = coroutine.resume(cos[i], n)
      check(ok, "resume")
      eq(r, n * (n + 1) / 2, "sum in coroutine")
      total = total + r
    end
    collectgarbage() -- idle coroutines with big stacks get shrunk here
    collectgarbage()
  end
  log("shrink total", total)
  -- the main thread too: deep, collect, deep again
  for i = 1, 3 do
    eq(sum(12000), 72006000, "main deep")
    collectgarbage()
  end
  log("main shrink ok")
end

T.section("varargs with thousands of values")
do
  local function count(...) return select("#", ...) end
  local function pass(...) return ... end
  local function last(...) local n = select("#", ...); return (select(n, ...)) end
  local function sumv(...)
    local s = 0
    for i = 1, select("#", ...) do s = s + (select(i, ...) or 0) end
    return s
  end
  local t = {}
  for i = 1, 7000 do t[i] = i end
  log("count", count(unpack(t)))
  log("pass", count(pass(unpack(t))), last(pass(unpack(t))))
  log("sum", sumv(unpack(t, 1, 2000)))
  log("nil holes", count(nil, nil, nil), count(unpack({}, 1, 5000)))
  -- vararg through table constructor and back
  local packed = { pass(unpack(t)) }
  eq(#packed, 7000, "packed")
  -- select with negative index
  log("neg", select(-1, unpack(t)), select("#", select(-7000, unpack(t))),
      (select(-7000, unpack(t))))
  log(pcall(select, -7001, unpack(t)))
  -- varargs through pcall, coroutine resume/yield and string.format
  log("pcall n", count(pcall(pass, unpack(t, 1, 5000))))
  local co = coroutine.create(function(...)
    local n = select("#", ...)
    local back = { coroutine.yield(n, ...) }
    return #back
  end)
  local r = { coroutine.resume(co, unpack(t, 1, 6000)) }
  log("co", r[1], r[2], #r)
  log("co2", coroutine.resume(co, unpack(t, 1, 3333)))
  -- too many values
  log(pcall(unpack, t, 1, 1e7))
  log(pcall(function() return count(unpack(t, 1, 9000)) end))
  -- varargs captured in nested closures and tail calls
  local function mk(...)
    local n = select("#", ...)
    local a = { ... }
    return function() return n, a[n] end
  end
  log(mk(unpack(t, 1, 4321))())
  local function tail(n, ...) if n == 0 then return select("#", ...) end return tail(n - 1, n, ...) end
  log("tail grow", tail(3000))
end

T.section("unpack edge cases")
do
  log(unpack({ 1, 2, 3 }, 2))
  log(unpack({ 1, 2, 3 }, 2, 5))
  log(select("#", unpack({}, 1, 0)))
  log(select("#", unpack({ 1 }, 3, 1)))
  log(pcall(unpack, nil))
  log(unpack({ "a", "b" }, -1, 1))
end

T.done("stack_varargs")
