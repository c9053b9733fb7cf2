-- Trace stitching (NYI C functions inside hot loops), jit.flush() in the
-- middle of hot loops, jit.off()/jit.on() toggled mid-run, jit.off(func),
-- jit.on(func, true), and aggressive trace settings (hotloop=1, hotexit=1)
-- that create many side traces.
-- When started with -joff the program never switches the JIT on.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg
local JIT = jit.status()
local function jit_on(...) if JIT then jit.on(...) end end

T.section("stitching through NYI functions")
do
  local s, parts = 0, {}
  for i = 1, 20000 do
    local str = "k" .. (i % 13)
    local r = str:gsub("%d", "D")               -- NYI: stitch
    local m = str:match("k(%d+)")               -- NYI: stitch
    s = s + #r + tonumber(m)
    if i % 2000 == 0 then
      local t = { i % 5, i % 3, i % 7 }
      table.sort(t)                             -- NYI with a callback-free C sort
      parts[#parts + 1] = table.concat(t, "")
    end
  end
  log("stitch", s, table.concat(parts, ","))
  -- stitching with a Lua callback inside the NYI function
  local acc = 0
  for i = 1, 5000 do
    local r = ("abc"):gsub(".", function(c) acc = acc + c:byte() + i % 3; return "" end)
    acc = acc + #r
  end
  log("stitch callback", acc)
  -- pcall/error and select-heavy stitched calls
  local errs = 0
  for i = 1, 10000 do
    local ok = pcall(error, i % 100 == 0 and "x" or nil)
    if ok then errs = errs - 1 else errs = errs + 1 end
  end
  log("stitch error", errs)
end

T.section("jit.flush in the middle of hot loops")
do
  local s = 0
  for i = 1, 100000 do
    s = s + i % 11
    if i % 10000 == 0 then jit.flush() end
  end
  log("flush loop", s)
  -- flush from inside a function called by the hot loop, and from a
  -- coroutine, and flushing a specific (maybe nonexistent) trace number
  local function maybe_flush(i)
    if i % 7777 == 0 then jit.flush() end
    if i % 9999 == 0 then jit.flush(1) end
    return i % 3
  end
  local s2 = 0
  for i = 1, 100000 do s2 = s2 + maybe_flush(i) end
  log("flush nested", s2)
  local co = coroutine.wrap(function()
    local k = 0
    for i = 1, 60000 do
      k = k + i % 5
      if i % 15000 == 0 then jit.flush(); coroutine.yield(k) end
    end
    return k
  end)
  log("flush co", co(), co(), co(), co(), co())
  -- flush while a stitched trace is pending
  local s3 = 0
  for i = 1, 30000 do
    local r = ("x"):rep(i % 4)                  -- compiled
    local g = r:gsub("x", "yy")                 -- stitch
    if i % 5000 == 0 then jit.flush() end
    s3 = s3 + #g
  end
  log("flush stitch", s3)
end

T.section("jit.off / jit.on mid-run")
do
  local s = 0
  for i = 1, 120000 do
    s = s + (i % 9) * 2
    if i % 20000 == 0 then
      if (i / 20000) % 2 == 1 then jit.off() else jit_on() end
    end
  end
  jit_on()
  log("toggle", s)
  -- jit.off(func): the function is never compiled; results unchanged
  local function work(n)
    local r = 0
    for i = 1, n do r = r + bit.bxor(i, 0x55) % 7 end
    return r
  end
  local want = work(50000)
  jit.off(work)
  eq(work(50000), want, "work off")
  jit_on(work)
  eq(work(50000), want, "work on")
  -- jit.off(func, true): also for functions created inside (recursive flag)
  local function factory()
    return function(n) local r = 0; for i = 1, n do r = r + i % 4 end; return r end
  end
  jit.off(factory, true)
  local f1 = factory()
  eq(f1(40000), 60000, "nested off")
  jit_on(factory, true)
  local f2 = factory()
  eq(f2(40000), 60000, "nested on")
  -- jit.off(true)/jit.on(true): the calling function
  local function self_off(n)
    jit.off(true)
    local r = 0
    for i = 1, n do r = r + i % 6 end
    return r
  end
  log("self_off", self_off(30000), self_off(30000))
  log(pcall(jit.off, 42))
  log("funcs", want)
end

T.section("aggressive settings: hotloop=1, hotexit=1, small trace limits")
do
  if JIT then
    jit.opt.start("hotloop=1", "hotexit=1", "maxside=20", "maxsnap=50", "tryside=1")
  end
  local function branchy(n)
    local s = 0
    for i = 1, n do
      local m = i % 16
      if m == 0 then s = s + 1 elseif m == 1 then s = s + 2 elseif m == 2 then s = s - 1
      elseif m < 8 then s = s + m elseif m < 12 then s = s * 1 + 0.5 else s = s - 0.25 end
    end
    return s
  end
  log("branchy", branchy(50000), branchy(50001))
  local function rec(n) if n < 2 then return n end return rec(n - 1) + rec(n - 2) end
  log("fib", rec(20))
  if JIT then jit.opt.start(0) end -- no optimizations
  log("branchy O0", branchy(20000))
  if JIT then jit.opt.start(3, "hotloop=56", "hotexit=10", "maxside=100", "maxsnap=500", "tryside=4") end
  log("branchy O3", branchy(20000))
  -- sizemcode/maxmcode tiny: traces fail to fit, abort, retry
  if JIT then jit.opt.start("maxmcode=64", "sizemcode=4") end
  log("branchy small mcode", branchy(30000))
  if JIT then jit.flush(); jit.opt.start("maxmcode=512", "sizemcode=32") end
  log("branchy after", branchy(30000))
end

T.done("jit_control")
