-- debug.sethook with count, line, call and return hooks: transcripts of the
-- events, hooks that error, hooks inside coroutines, hooks at depth.
--
-- Compiled traces do not call hooks, so event transcripts are only
-- deterministic in the interpreter. The transcript sections run with the JIT
-- disabled and flushed (jit.flush(); jit.off()); the last section turns the
-- JIT back on and checks only hook-independent results while hooks are set.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg
local sethook, gethook, getinfo = debug.sethook, debug.gethook, debug.getinfo

local jit_was_on = jit.status()
jit.flush()
jit.off()

-- Record events compactly: "c:name" "r:name" "l<line>" "#"
local ev = {}
local function recorder(event, line)
  local info = getinfo(2, "nS")
  local name = info and (info.name or (info.what == "main" and "main") or info.short_src .. ":" .. (info.linedefined or "?")) or "?"
  if event == "line" then ev[#ev + 1] = "l" .. line
  elseif event == "count" then ev[#ev + 1] = "#"
  else ev[#ev + 1] = event:sub(1, 1) .. ":" .. name end
end
local function dump(label)
  log(label, #ev, table.concat(ev, " "))
  ev = {}
end

local function leaf(x) return x * 2 end
local function mid(x)
  local a = leaf(x)
  local b = leaf(a)
  return a + b
end
local function top(n)
  local s = 0
  for i = 1, n do s = s + mid(i) end
  return s
end

T.section("call and return hooks")
sethook(recorder, "cr")
local r = top(2)
sethook()
dump("cr")
eq(r, 18, "top(2)")

T.section("line hooks")
sethook(recorder, "l")
r = top(2)
sethook()
dump("l")

T.section("count hooks")
for _, c in ipairs({ 1, 7, 50 }) do
  sethook(recorder, "", c)
  r = top(3)
  sethook()
  log("count", c, #ev > 0)
  dump("count" .. c)
end

T.section("gethook")
do
  sethook(recorder, "crl", 100)
  local f, mask, cnt = gethook()
  sethook()
  ev = {}
  log("gethook", f == recorder, mask, cnt)
  log("after clear", gethook())
end

T.section("hooks with C functions, pcall and errors")
do
  sethook(recorder, "cr")
  local ok, e = pcall(function()
    local s = string.rep("a", 3)
    local t = {}
    table.insert(t, s)
    error("boom")
  end)
  sethook()
  dump("cr-pcall")
  log(ok, msg(e))
end

T.section("hooks that error")
do
  for _, mask in ipairs({ "c", "r", "l" }) do
    local n = 0
    sethook(function(event, line)
      n = n + 1
      if n == 3 then error("hook " .. event .. " fails") end
    end, mask)
    local ok, e = pcall(top, 3)
    sethook()
    log(mask, ok, msg(e), n)
  end
  local n = 0
  sethook(function() n = n + 1; if n == 5 then error({ hook = n }) end end, "", 3)
  local ok, e = pcall(top, 10)
  sethook()
  log("count err", ok, type(e) == "table" and e.hook, n)
end

T.section("hooks at depth and across coroutines")
do
  local function rec(k) if k == 0 then return 0 end return rec(k - 1) + 1 end
  local calls, rets, maxdepth, depth = 0, 0, 0, 0
  sethook(function(event)
    if event == "call" then
      calls = calls + 1; depth = depth + 1
      if depth > maxdepth then maxdepth = depth end
    elseif event == "return" then
      rets = rets + 1; depth = depth - 1
    end
  end, "cr")
  local v = rec(300)
  sethook()
  log("rec", v, calls, rets, maxdepth)
  -- hooks set inside a coroutine are global in LuaJIT; record a transcript
  local co = coroutine.create(function(a)
    sethook(recorder, "cr")
    local b = coroutine.yield(leaf(a))
    local c = mid(b)
    sethook()
    return c
  end)
  log(coroutine.resume(co, 3))
  log(coroutine.resume(co, 4))
  sethook()
  dump("co")
  -- a hook that yields is not allowed; error is caught
  local co2
  co2 = coroutine.create(function()
    sethook(function()
      if coroutine.running() == co2 then coroutine.yield() end
    end, "l")
    local x = 1
    x = x + 1
    return x
  end)
  local ok, e = coroutine.resume(co2)
  sethook()
  log("yield in hook", ok, msg(e))
  -- a hook that itself calls functions (hooks are disabled inside hooks)
  local inner = 0
  sethook(function(event)
    inner = inner + 1
    top(2) -- would recurse into the hook if hooks were not disabled
  end, "c")
  top(1)
  sethook()
  log("hook calling functions", inner)
end

T.section("line hook through loops, goto and tail calls")
do
  local function tc(n) if n == 0 then return "end" end return tc(n - 1) end
  local function looper()
    local i = 0
    ::again::
    i = i + 1
    if i < 3 then goto again end
    local s = 0
    while s < 3 do s = s + 1 end
    repeat s = s - 1 until s == 0
    return tc(2)
  end
  sethook(recorder, "lcr")
  local v = looper()
  sethook()
  dump("looper")
  log(v)
end

T.section("debug.traceback and getinfo inside hooks")
do
  local seen = {}
  sethook(function(event)
    local info = getinfo(2, "Sl")
    if info.what == "Lua" and #seen < 6 then
      seen[#seen + 1] = info.currentline .. "@" .. info.linedefined
    end
  end, "c")
  top(1)
  sethook()
  log("getinfo", table.concat(seen, " "))
  local tb
  sethook(function(event)
    if not tb then tb = T.tb("from hook", 2) end
  end, "r")
  mid(1)
  sethook()
  log((tb:gsub("\n", "|")))
end

T.section("hooks with the JIT enabled (invariants only)")
if jit_was_on then jit.on() end
do
  -- A loop that is (likely) compiled, then hooks get set and cleared while it
  -- runs. Hooks do not fire inside traces, so only results are checked.
  local function work(n)
    local s = 0
    for i = 1, n do s = s + (i % 7) * (i % 3) end
    return s
  end
  local want = work(20000)
  local fired = 0
  for round = 1, 30 do
    if round % 3 == 0 then sethook(function() fired = fired + 1 end, "", 97)
    elseif round % 3 == 1 then sethook(function() fired = fired + 1 end, "crl")
    else sethook() end
    eq(work(20000), want, "work under hooks")
  end
  sethook()
  -- a hook erroring while compiled code runs: result or the hook's error
  local ok, e = pcall(function()
    sethook(function() error("jit hook error") end, "", 1000)
    local v = work(50000)
    sethook()
    return v
  end)
  sethook()
  check(ok or tostring(e):find("jit hook error", 1, true), "hook error or success")
  log("jit hooks", want)
end

T.done("hooks")
