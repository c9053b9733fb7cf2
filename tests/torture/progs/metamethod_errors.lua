-- Errors (and yields, and pcall) inside metamethods, triggered from Lua
-- operators, from C library functions and from hot loops.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

local function try(f, ...)
  local r = { pcall(f, ...) }
  if r[1] then return "ok:" .. T.show(r[2]) end
  return "err:" .. msg(r[2])
end

-- A metatable whose every metamethod fails in a different way, selected by
-- the object's mode field.
local function fail(mode, what)
  if mode == "string" then error(what .. " failed")
  elseif mode == "level2" then error(what .. " failed (level 2)", 2)
  elseif mode == "table" then error({ mm = what })
  elseif mode == "runtime" then local x = nil; return x[what]
  elseif mode == "deep" then
    local function d(n) if n == 0 then error("deep " .. what) end d(n - 1) end
    d(150)
  end
  return "ok-" .. what
end

local mt = {}
for _, ev in ipairs({ "__index", "__newindex", "__call", "__add", "__sub",
    "__mul", "__div", "__mod", "__pow", "__unm", "__concat", "__eq", "__lt",
    "__le", "__len", "__tostring" }) do
  mt[ev] = function(a, b, c)
    local self = (type(a) == "table" or type(a) == "userdata") and a or b
    local r = fail(self.mode, ev)
    if ev == "__eq" or ev == "__lt" or ev == "__le" then return true end
    if ev == "__tostring" then return "obj:" .. self.mode end
    return r
  end
end

local function obj(mode)
  return setmetatable({ mode = mode }, mt)
end
-- userdata with the same behaviour (needed for __len, which tables ignore in
-- Lua 5.1 mode).
local function udobj(mode)
  local p = newproxy(true)
  local m = getmetatable(p)
  for k, v in pairs(mt) do m[k] = v end
  m.__index = function(u, k)
    if k == "mode" then return mode end
    return fail(mode, "__index")
  end
  return p
end

local ops = {
  { "index", function(a) return a.missing end },
  { "newindex", function(a) a.missing = 1 end },
  { "call", function(a) return a(1, 2) end },
  { "add", function(a) return a + 1 end },
  { "radd", function(a) return 1 + a end },
  { "sub", function(a) return a - 1 end },
  { "mul", function(a) return 2 * a end },
  { "div", function(a) return a / 3 end },
  { "mod", function(a) return a % 3 end },
  { "pow", function(a) return a ^ 2 end },
  { "unm", function(a) return -a end },
  { "concat", function(a) return "x" .. a end },
  { "concat3", function(a) return "x" .. a .. "y" .. 1 end },
  { "eq", function(a) local b = setmetatable({ mode = a.mode }, getmetatable(a)); return a == b end },
  { "lt", function(a) return a < a end },
  { "le", function(a) return a <= a end },
  { "gt", function(a) return a > a end },
  { "len", function(a) return #a end },
  { "tostring", function(a) return tostring(a) end },
  { "tostring-print", function(a) return string.format("%s", tostring(a)) end },
  { "sort-lt", function(a) local t = { a, a, a }; table.sort(t); return #t end },
}

T.section("table objects")
for _, mode in ipairs({ "ok", "string", "level2", "table", "runtime", "deep" }) do
  for _, op in ipairs(ops) do
    local a = obj(mode)
    local r = try(op[2], a)
    log(mode, op[1], r)
  end
end

T.section("userdata objects")
for _, mode in ipairs({ "ok", "string", "table" }) do
  for _, opname in ipairs({ "len", "unm", "add", "concat", "call", "eq" }) do
    local f
    for _, op in ipairs(ops) do if op[1] == opname then f = op[2] end end
    local u = udobj(mode)
    local r
    if opname == "eq" then
      local u2 = udobj(mode)
      getmetatable(u2).__eq = getmetatable(u).__eq
      r = try(function() return u == u2 end)
    else
      r = try(f, u)
    end
    log("ud", mode, opname, r)
  end
end

T.section("__index chains")
do
  -- 60-level chain of tables ending in a function that errors at level 2.
  local base = setmetatable({}, { __index = function(t, k)
    if k == "bad" then error("chain end: " .. k, 2) end
    return "v_" .. k
  end })
  local cur = base
  for i = 1, 60 do cur = setmetatable({ ["k" .. i] = i }, { __index = cur }) end
  log(cur.k1, cur.k60, cur.zzz)
  log(try(function() return cur.bad end))
  -- __newindex chain into a function
  local sink = {}
  local w = setmetatable({}, { __newindex = setmetatable({}, { __newindex = function(t, k, v)
    if v == "boom" then error("newindex refused " .. k) end
    rawset(sink, k, v)
  end }) })
  w.a = 1; w.b = 2
  log(sink.a, sink.b, rawget(w, "a"))
  log(try(function() w.c = "boom" end))
  -- an __index loop must be detected
  local l1, l2 = {}, {}
  setmetatable(l1, { __index = l2 }); setmetatable(l2, { __index = l1 })
  log(try(function() return l1.x end))
end

T.section("metamethods calling pcall, yielding, recursing")
do
  local mt2 = {}
  mt2.__add = function(a, b)
    local ok, e = pcall(function() return a.v + b.v end)
    return setmetatable({ v = ok and e or -1 }, mt2)
  end
  mt2.__index = function(t, k)
    -- yields when inside a coroutine
    local co, ismain = coroutine.running()
    if co and not ismain then return coroutine.yield("need " .. k) end
    return 0
  end
  local a = setmetatable({ v = 1 }, mt2)
  local b = setmetatable({ v = 2 }, mt2)
  log((a + b).v, (a + {}).v)
  local co = coroutine.wrap(function()
    local t = setmetatable({}, mt2)
    local x = t.foo + t.bar
    return "sum " .. x
  end)
  log(co(), co(10), co(32))
  -- metamethod recursion: __concat builds a long chain
  local cmt = {}
  cmt.__concat = function(a, b)
    local av = type(a) == "table" and a.s or a
    local bv = type(b) == "table" and b.s or b
    if #av + #bv > 300 then error("too long") end
    return setmetatable({ s = av .. bv }, cmt)
  end
  local s = setmetatable({ s = "" }, cmt)
  for i = 1, 50 do s = s .. tostring(i % 10) end
  log(#s.s, s.s:sub(1, 20))
  local ok, e = pcall(function() for i = 1, 1000 do s = s .. "abcdef" end end)
  log(ok, msg(e), #s.s)
  -- __eq with different metamethods: not called in 5.1 semantics
  local e1 = setmetatable({}, { __eq = function() error("never") end })
  local e2 = setmetatable({}, { __eq = function() error("never2") end })
  log(try(function() return e1 == e2 end))
  -- __lt with mixed types: error before calling the metamethod
  log(try(function() return e1 < 1 end))
  -- __call chains: calling a callable whose __call is a callable
  local inner = setmetatable({}, { __call = function(self, x) return "inner", x end })
  local outer = setmetatable({}, { __call = function(self, x) return inner(x + 1) end })
  log(outer(1))
  -- __call on a table which errors with level 2 (points at the caller)
  local bad = setmetatable({}, { __call = function() error("call refused", 2) end })
  log(try(function() return bad() end))
end

T.section("metamethods in hot loops")
do
  local hits = 0
  local vmt = { __index = function(t, k) hits = hits + 1; return k * 2 end,
                __add = function(a, b) return (type(a) == "table" and a.n or a) + (type(b) == "table" and b.n or b) end }
  local v = setmetatable({ n = 5 }, vmt)
  local sum = 0
  for i = 1, 3000 do
    sum = sum + v[i] + (v + i)
  end
  log("hot sum", sum, hits)
  eq(hits, 3000, "index mm calls")
  -- after being hot, the metamethod starts to fail
  local fails = 0
  for i = 1, 3000 do
    local ok, e = pcall(function() return v[i] end)
    if i > 2500 then vmt.__index = function(t, k) error("late " .. k) end end
    if not ok then fails = fails + 1 end
  end
  log("late fails", fails)
  eq(fails, 499, "late failures")
end

T.done("metamethod_errors")
