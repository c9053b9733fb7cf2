-- Coroutines: yield across pcall/xpcall/metamethods/iterators, yields from
-- nested Lua calls, wrap, errors inside coroutines, dead coroutines, deep
-- recursion inside coroutines, many live coroutines, running/status.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg
local create, resume, yield, status, wrap, running =
  coroutine.create, coroutine.resume, coroutine.yield, coroutine.status,
  coroutine.wrap, coroutine.running

T.section("yield across pcall and xpcall")
do
  local co = create(function(a)
    local ok, v = pcall(function()
      local x = yield(a + 1)
      local ok2, y = xpcall(function()
        local z = yield(x * 2)
        if z == "fail" then error("inner fail") end
        return z
      end, function(e) return "H:" .. msg(e) end)
      local w = yield(tostring(ok2) .. "/" .. tostring(y))
      error({ w = w })
    end)
    return "end", ok, type(v) == "table" and v.w or msg(v)
  end)
  log(resume(co, 1))
  log(resume(co, 10))
  log(resume(co, "fail"))
  log(resume(co, "last"))
  log(status(co), resume(co))
end

T.section("yield from nested Lua calls")
do
  local function deep(n, acc)
    if n == 0 then
      local v = yield(acc)
      return v
    end
    local r = deep(n - 1, acc + n)
    return r + 1
  end
  local co = create(function()
    local total = 0
    for round = 1, 5 do total = total + deep(round * 40, 0) end
    return total
  end)
  local outs = {}
  local ok, v = resume(co)
  while status(co) == "suspended" do
    outs[#outs + 1] = v
    ok, v = resume(co, 1000)
  end
  log("yields", table.concat(outs, ","), "result", ok, v)
  eq(v, 5000 + 40 + 80 + 120 + 160 + 200, "deep yield result")
end

T.section("coroutine.wrap generators and errors")
do
  local function gen(n)
    return wrap(function()
      for i = 1, n do yield(i, i * i) end
      return nil
    end)
  end
  local s = 0
  for i, sq in gen(100) do s = s + i + sq end
  log("gen sum", s)
  eq(s, 5050 + 338350, "gen sum")
  local bad = wrap(function() yield(1); error("wrapped boom") end)
  log(bad())
  log(pcall(bad))
  log(pcall(bad))           -- dead now
  local tbad = wrap(function() error({ code = 7 }) end)
  local ok, e = pcall(tbad)
  log("table err from wrap", ok, type(e), e.code)
  -- error position for runtime errors inside wrap
  local rt = wrap(function() local n; return n.x end)
  log(pcall(rt))
end

T.section("dead coroutines and status")
do
  local co = create(function(...) return select("#", ...), ... end)
  log(status(co))
  log(resume(co, 1, nil, 3, nil))
  log(status(co))
  log(resume(co))
  log(resume(co, 1))
  local errco = create(function() error("died") end)
  log(resume(errco))
  log(status(errco), resume(errco))
  -- resuming a running coroutine / normal coroutine
  local outer
  outer = create(function()
    local inner = create(function()
      log("inner sees outer", status(outer))
      return resume(outer)
    end)
    log("self resume", resume(outer))
    return resume(inner)
  end)
  log(resume(outer))
  -- yield outside a coroutine
  log(pcall(yield, 1))
  -- running()
  local mainco, ismain = running()
  log("main", type(mainco), ismain)
  local co2 = create(function()
    local c, m = running()
    return type(c), m, status(c)
  end)
  log(resume(co2))
  -- wrong argument types
  log(pcall(resume, 42))
  log(pcall(create, 42))
  log(pcall(status, nil))
end

T.section("deep recursion inside coroutines")
do
  local function sum(n) if n == 0 then return 0 end return n + sum(n - 1) end
  local co = create(function(n)
    while true do n = yield(sum(n)) end
  end)
  local res = {}
  for _, n in ipairs({ 10, 5000, 12000, 100, 9000, 3 }) do
    local ok, v = resume(co, n)
    check(ok, "resume ok")
    eq(v, n * (n + 1) / 2, "sum " .. n)
    res[#res + 1] = v
  end
  log("sums", table.concat(res, ","))
  -- stack overflow inside a coroutine is an error of that coroutine
  local function inf(n) return 1 + inf(n + 1) end
  local co2 = create(function() return inf(1) end)
  local ok, e = resume(co2)
  log("overflow", ok, T.sov(e), status(co2))
  -- pcall inside the coroutine catches its own overflow, coroutine goes on
  local co3 = create(function()
    local ok, e = pcall(inf, 1)
    yield(ok, T.sov(e))
    return sum(1000)
  end)
  log(resume(co3))
  log(resume(co3))
end

T.section("many live coroutines")
do
  local cos = {}
  local N = 2000
  for i = 1, N do
    cos[i] = create(function(a)
      local acc = a
      for step = 1, 4 do
        local v = yield(acc)
        acc = acc + v * i
      end
      return acc
    end)
  end
  local total = 0
  for step = 0, 4 do
    for i = 1, N do
      local ok, v = resume(cos[i], step == 0 and i or step)
      check(ok, "resume many")
      if step == 4 then total = total + v end
    end
  end
  for i = 1, N do check(status(cos[i]) == "dead", "dead") end
  log("many total", total)
  -- expected: i + i*(1+2+3+4) = 11*i
  eq(total, 11 * N * (N + 1) / 2, "many total")
end

T.section("coroutines resuming coroutines (chain)")
do
  local function chain(n)
    if n == 0 then
      return create(function(x) while true do x = yield(x + 1) end end)
    end
    local below = chain(n - 1)
    return create(function(x)
      while true do
        local ok, v = resume(below, x)
        check(ok, "chain resume")
        x = yield(v + 1)
      end
    end)
  end
  local top = chain(150)
  local ok, v = resume(top, 0)
  log("chain", ok, v)
  ok, v = resume(top, 1000)
  log("chain2", ok, v)
  eq(v, 1151, "chain value")
end

T.section("yield across metamethods and iterators")
do
  local mt = {
    __index = function(t, k) return yield("idx:" .. k) end,
    __add = function(a, b) return yield("add") end,
    __concat = function(a, b) return yield("cat") end,
    __eq = function(a, b) return yield("eq") end,
    __lt = function(a, b) return yield("lt") end,
    __call = function(self, x) return yield("call:" .. x) end,
  }
  local co = wrap(function()
    local a, b = setmetatable({}, mt), setmetatable({}, mt)
    local r = {}
    r[#r + 1] = a.foo
    r[#r + 1] = a + 1
    r[#r + 1] = a .. "x"
    r[#r + 1] = tostring(a == b)
    r[#r + 1] = tostring(a < b)
    r[#r + 1] = a(5)
    for k, v in function(s, c) c = c + 1; if c <= 3 then return c, yield("iter" .. c) end end, nil, 0 do
      r[#r + 1] = k .. "=" .. tostring(v)
    end
    return "done:" .. table.concat(r, ",")
  end)
  local v = co()
  local answers = { "F", "S", "C", true, false, "CALL", "i1", "i2", "i3" }
  local i = 1
  local seen = {}
  while not v:find("^done") do
    seen[#seen + 1] = v
    v = co(answers[i]); i = i + 1
  end
  log(table.concat(seen, " "))
  log(v)
  -- yield across C function boundaries that do not allow it
  local co2 = create(function() return table.sort({ 3, 2, 1 }, function(a, b) yield() return a < b end) end)
  log(resume(co2))
  local co3 = create(function() return ("abc"):gsub(".", function(c) return yield(c) end) end)
  log(resume(co3))
  local co4 = create(function()
    local t = setmetatable({}, { __tostring = function() return yield("ts") end })
    return tostring(t)
  end)
  log(resume(co4))
end

T.section("error inside nested coroutines propagates through resume chain")
do
  local function level(n)
    if n == 0 then error({ depth = 0 }) end
    local co = create(level)
    local ok, e = resume(co, n - 1)
    check(not ok, "inner failed")
    e.depth = e.depth + 1
    error(e)
  end
  local ok, e = pcall(level, 100)
  log("nested errors", ok, e.depth)
  eq(e.depth, 100, "depth")
end

T.section("hot loop with coroutine switches")
do
  local prod = wrap(function()
    local i = 0
    while true do i = i + 1; yield(i % 7 == 0 and "s" or i) end
  end)
  local s, n = 0, 0
  for k = 1, 20000 do
    local v = prod()
    if type(v) == "number" then s = s + v else n = n + 1 end
  end
  log("switches", s, n)
end

T.done("coroutines")
