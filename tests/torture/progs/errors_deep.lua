-- Errors, pcall and xpcall at depth; table error objects; errors in error
-- handlers; error() levels; nested pcall inside xpcall handlers; messages
-- with positions.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

T.section("error at depth caught at top")
local function rec(n, f, ...)
  if n == 0 then return f(...) end
  local r = rec(n - 1, f, ...)   -- not a tail call: keeps n frames alive
  return r
end
for _, depth in ipairs({1, 10, 100, 300, 700}) do
  local ok, e = pcall(rec, depth, function(x) error("boom at " .. x) end, depth)
  check(not ok, "must fail")
  log(depth, msg(e))
end

T.section("pcall at every level, table error object rethrown")
local function nest(n)
  if n == 0 then error({ code = 0, path = {} }) end
  local ok, e = pcall(nest, n - 1)
  check(not ok and type(e) == "table", "table error expected")
  e.code = e.code + n
  e.path[#e.path + 1] = n
  error(e)
end
do
  local ok, e = pcall(nest, 250)
  check(not ok, "nest fails")
  eq(e.code, 250 * 251 / 2, "sum of levels")
  eq(#e.path, 250, "path length")
  eq(e.path[1], 1, "innermost first")
  log("nest", e.code, #e.path, e.path[1], e.path[250])
end

T.section("pcall results survive deep stacks")
do
  local function many(n)
    if n == 0 then return 1, 2, 3, "x", nil, true end
    return select(2, pcall(many, n - 1))
  end
  log(many(200))
  eq(select("#", many(200)), 6, "six results")
end

T.section("error levels")
local function lvl(level) error("lvl" .. tostring(level), level) end
local function caller(level) lvl(level) end -- line of the call matters
local function outer(level) caller(level) end
for _, level in ipairs({0, 1, 2, 3, 4}) do
  local ok, e = pcall(outer, level)
  log("level", level, msg(e))
end
do -- level pointing at a C function (pcall) gives no position
  local ok, e = pcall(error, "cfunc level", 2)
  log("clevel", msg(e))
  ok, e = pcall(error, "lvl1 via pcall", 1)
  log("clevel1", msg(e))
end

T.section("non-string error values")
do
  local vals = { 42, 3.5, true, false, {1, 2}, print, coroutine.create(print) }
  for i = 1, #vals do
    local ok, e = pcall(error, vals[i])
    log(i, type(e), type(e) == "number" and e or (type(e) == "boolean" and tostring(e) or "-"))
  end
  local ok, e = pcall(error)
  log("error()", ok, e)
  ok, e = pcall(function() error(42) end)
  log("error(42) in Lua", type(e), msg(e))
  ok, e = pcall(function() error(nil) end)
  log("error(nil) in Lua", ok, e)
  ok, e = pcall(function() error(setmetatable({}, { __tostring = function() return "TS" end })) end)
  log("__tostring error object", type(e), tostring(e))
end

T.section("runtime error messages")
do
  local cases = {
    function() local t = nil; return t.x end,
    function() local t = {}; return t.a.b end,
    function() return undefined_global.x end,
    function() undefined_fn() end,
    function() local s = "x"; return s:nomethod() end,
    function() local a; return a + 1 end,
    function() local a = {}; return 1 - a end,
    function() return {} .. "x" end,
    function() return 1 < "2" end,
    function() return {} < {} end,
    function() return #nil end,
    function() local up = nil; return (function() return up.field end)() end,
    function() return -{} end,
    function() local t = setmetatable({}, { __index = function(t, k) return k.x end }); return t[1] end,
    function() return ("x"):rep(-1):bad() end,
    function() return math.floor("abc") end,
    function() return string.rep() end,
    function() return setmetatable(1, {}) end,
    function() return ipairs() end,
    function() return ("%d"):format("x") end,
    function() local t = {}; t[nil] = 1 end,
    function() local t = {}; t[0/0] = 1 end,
    function() return tostring() end,
    function() for i = 1, "x" do end end,
    function() return 2^{} end,
    function() return select(0) end,
  }
  for i = 1, #cases do
    local ok, e = pcall(cases[i])
    check(not ok, "case " .. i .. " must fail")
    log(i, msg(e))
  end
end

T.section("xpcall handlers")
do
  local function h(e) return "handled<" .. msg(e) .. ">" end
  log(xpcall(function() error("plain") end, h))
  log(xpcall(function(a, b) return a + b end, h, 20, 22))
  log(xpcall(function(a, b) return a + b end, h, 20, nil))
  -- handler sees the erroring frame: traceback at depth
  local tb
  local ok = xpcall(rec, function(e)
    tb = T.tb(msg(e), 2)
    return 0
  end, 40, function() error("tb here") end)
  local n = 0
  for _ in tb:gmatch("\n") do n = n + 1 end
  log("traceback lines", n)
  check(tb:find("tb here", 1, true), "traceback has message")
  log((tb:gsub("\n", "|"):sub(1, 400)))
end

T.section("errors in error handlers")
do
  log(xpcall(function() error("x") end, function(m) error("in handler") end))
  log(xpcall(function() error("x") end, function(m) local t; return t.x end))
  -- handler that errors only the first time: second invocation succeeds?
  local calls = 0
  local r = { xpcall(function() error("first") end, function(m)
    calls = calls + 1
    if calls == 1 then error("handler-fail") end
    return "recovered:" .. msg(m)
  end) }
  log("handler calls", calls, T.show(r))
  -- error in handler at depth with a table error object
  log(xpcall(function() rec(100, error, { tag = "deep" }) end, function(m)
    return type(m) == "table" and m.tag or "?"
  end))
end

T.section("nested pcall inside xpcall handlers")
do
  local depth = 0
  local function handler(e)
    depth = depth + 1
    local ok, inner = pcall(function() error("inner" .. depth) end)
    local ok2, inner2 = xpcall(function() return rec(50, error, "deeper") end,
                               function(m) return "h2:" .. msg(m) end)
    return msg(e) .. " | " .. msg(inner) .. " | " .. inner2
  end
  log(xpcall(function() rec(120, error, "outer") end, handler))
  -- handler that itself uses xpcall recursively 30 levels deep
  local function hrec(n)
    if n == 0 then error("bottom") end
    local ok, e = xpcall(function() return hrec(n - 1) end, function(m)
      return (type(m) == "string" and #m < 2000) and (m .. "<" .. n) or m
    end)
    error(e, 0)
  end
  local ok, e = pcall(hrec, 30)
  log("hrec", #e, e:sub(1, 60), e:sub(-20))
end

T.section("pcall of non-functions, pcall(pcall), select")
do
  log(pcall(nil))
  log(pcall({}))
  log(pcall(setmetatable({}, { __call = function(self, a) return "called", a end }), 7))
  log(pcall(pcall, error, "x"))
  log(pcall(pcall, pcall, error, "y"))
  log(select("#", pcall(function() return end)))
  log(xpcall(pcall, print, error, "z"))
end

T.section("error crossing C functions")
do
  local ok, e = pcall(string.gsub, "abc", "%w", function(c)
    if c == "b" then error("gsub cb " .. c) end
  end)
  log(msg(e))
  ok, e = pcall(table.sort, {3, 2, 1, 5, 4}, function(a, b) error({ a = a, b = b }) end)
  log(type(e), type(e.a))
  ok, e = pcall(function() return tostring(setmetatable({}, { __tostring = function() error("ts!") end })) end)
  log(msg(e))
  ok, e = pcall(load, function() error("reader fails") end)
  log(ok, msg(e))
end

T.section("repeated error/recover cycles (stack reuse)")
do
  local acc = 0
  for i = 1, 2000 do
    local ok, e = pcall(rec, i % 37, function(v)
      if v % 3 == 0 then error(v) end
      return v
    end, i)
    if ok then acc = acc + e else acc = acc - tonumber(e:match("(%d+)$")) end
  end
  log("acc", acc)
  local want = 0
  for i = 1, 2000 do if i % 3 == 0 then want = want - i else want = want + i end end
  eq(acc, want, "acc")
end

T.done("errors_deep")
