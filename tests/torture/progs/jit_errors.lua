-- Errors raised while compiled code runs: a function called from a hot loop
-- starts failing after it was compiled, arithmetic on nil inside a trace,
-- indexing nil, calling non-functions, errors from C functions called from
-- traces, errors with tracebacks taken from compiled frames, at depth and
-- inside coroutines. Every error is caught and the loop state verified.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

T.section("callee starts failing after compilation")
do
  local limit = 1e9
  local function f(x)
    if x > limit then error("over limit " .. x) end
    return x * 2
  end
  local function loop(n)
    local s = 0
    for i = 1, n do s = s + f(i) end
    return s
  end
  log("warm", loop(10000))
  for _, l in ipairs({ 5000, 1, 9999, 100000 }) do
    limit = l
    local ok, e = pcall(loop, 10000)
    log("limit", l, ok, msg(e))
  end
end

T.section("arithmetic on nil / bad types inside traces")
do
  local function run(vals, n)
    local s = 0
    for i = 1, n do
      local v = vals[i % #vals + 1]
      s = s + v * 2 - 1
    end
    return s
  end
  local good = {}
  for i = 1, 50 do good[i] = i end
  log("good", run(good, 20000))
  local cases = {
    { "nil", nil }, { "table", {} }, { "string-num", "12" }, { "string", "abc" },
    { "bool", true }, { "float", 0.5 },
  }
  for _, c in ipairs(cases) do
    local vals = {}
    for i = 1, 50 do vals[i] = i end
    vals[37] = c[2]
    local ok, e = pcall(run, vals, 20000)
    log(c[1], ok, msg(e))
  end
end

T.section("index/call errors in traces")
do
  local function access(t, n)
    local s = 0
    for i = 1, n do s = s + t[i % 10 + 1].v end
    return s
  end
  local t = {}
  for i = 1, 10 do t[i] = { v = i } end
  log(access(t, 30000))
  t[7] = nil
  log(pcall(access, t, 30000))
  t[7] = 5
  log(pcall(access, t, 30000))
  local fns = {}
  for i = 1, 10 do fns[i] = function(x) return x + i end end
  local function calls(n)
    local s = 0
    for i = 1, n do s = s + fns[i % 10 + 1](i) end
    return s
  end
  log(calls(30000))
  fns[4] = "not callable"
  log(pcall(calls, 30000))
  fns[4] = setmetatable({}, { __call = function(self, x) return -x end })
  log(calls(30000))
end

T.section("errors from C functions called in traces")
do
  local function conv(list, n)
    local s = 0
    for i = 1, n do
      s = s + math.floor(list[i % #list + 1]) + #string.rep("x", i % 3)
    end
    return s
  end
  local list = { 1.5, 2.5, 3.5 }
  log(conv(list, 30000))
  list[2] = "x"
  log(pcall(conv, list, 30000))
  list[2] = "7.9" -- coercion
  log(pcall(conv, list, 30000))
  local function bits(n)
    local s = 0
    for i = 1, n do s = s + bit.band(i, i % 5 == 0 and 0xff or 0xf) end
    return s
  end
  log(bits(30000))
  local function badbits(n)
    local s = 0
    for i = 1, n do s = s + bit.band(i, i > n - 3 and {} or 1) end
    return s
  end
  log(pcall(badbits, 30000))
end

T.section("tracebacks taken from errors inside compiled code")
do
  local function inner(x) if x == 12345 then error("inner at " .. x) end return x end
  local function middle(x) return inner(x) + 1 end
  local function outer(n)
    local s = 0
    for i = 1, n do s = s + middle(i) end
    return s
  end
  local ok, tb = xpcall(outer, function(e) return T.tb(msg(e), 2) end, 20000)
  log(ok, (tb:gsub("\n", "|")))
  -- debug.getinfo/getlocal of frames restored from a snapshot
  local snap
  local function probe(x)
    if x == 15000 then
      local n, v = debug.getlocal(2, 2) -- outer2's 's'
      snap = tostring(n) .. "=" .. tostring(v) .. " line " .. debug.getinfo(2, "l").currentline
    end
    return 1
  end
  local function outer2(n)
    local s = 0
    for i = 1, n do s = s + probe(i) end
    return s
  end
  log(outer2(20000), snap)
end

T.section("errors in compiled code at depth and in coroutines")
do
  local function hot(n, failat)
    local s = 0
    for i = 1, n do
      s = s + i
      if i == failat then local z; s = s + z end
    end
    return s
  end
  local function rec(d, n, failat)
    if d == 0 then return hot(n, failat) end
    local r = rec(d - 1, n, failat)
    return r
  end
  for _, d in ipairs({ 0, 50, 400 }) do
    log(d, pcall(rec, d, 10000, 9000))
    log(d, pcall(rec, d, 10000, -1))
  end
  local co = coroutine.create(function(n)
    while true do
      local ok, e = pcall(hot, n, n - 5)
      n = coroutine.yield(msg(e))
    end
  end)
  for i = 1, 4 do log("co", coroutine.resume(co, 5000 * i)) end
  -- error that is not caught inside the coroutine kills it
  local co2 = coroutine.create(function() return hot(20000, 19999) end)
  log("co2", coroutine.resume(co2))
  log("co2 status", coroutine.status(co2))
end

T.section("repeated failing traces (blacklisting paths)")
do
  local fails, s = 0, 0
  for round = 1, 300 do
    local ok, v = pcall(function()
      local acc = 0
      for i = 1, 200 do
        acc = acc + i
        if i == 150 and round % 3 == 0 then error("round " .. round) end
      end
      return acc
    end)
    if ok then s = s + v else fails = fails + 1 end
  end
  log("fails", fails, "sum", s)
  eq(fails, 100, "fails")
end

T.done("jit_errors")
