-- debug.traceback at depth, debug.getinfo / getlocal / setlocal /
-- getupvalue / setupvalue / upvalueid / upvaluejoin, inspecting other
-- coroutines, frames of C functions, tail calls and metamethods.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

local function lines(s) local n = 1; for _ in s:gmatch("\n") do n = n + 1 end; return n end

T.section("traceback at depth")
do
  local captured
  local function rec(n, tag)
    if n == 0 then captured = T.tb("at bottom " .. tag, 1); return 0 end
    local r = rec(n - 1, tag)
    return r + 1
  end
  for _, d in ipairs({ 0, 5, 9, 10, 11, 12, 21, 22, 23, 200 }) do
    rec(d, "d" .. d)
    log(d, lines(captured), (captured:gsub("\n", "|")):sub(1, 160))
  end
  -- the full text for one depth where "..." elision kicks in
  rec(30, "full")
  log((captured:gsub("\n", "|")))
  -- traceback with a non-string message returns the message unchanged
  log(type(debug.traceback({})), debug.traceback(nil) ~= nil, debug.traceback(12) ~= nil)
  -- traceback of another coroutine
  local co = coroutine.create(function(a)
    local function inner(x) coroutine.yield(x) end
    inner(a); return 1
  end)
  coroutine.resume(co, 5)
  log((debug.traceback(co, "co tb"):gsub("0x%x+", "0x?"):gsub("\n", "|")))
  log((debug.traceback(co, "co tb level 1", 1):gsub("0x%x+", "0x?"):gsub("\n", "|")))
end

T.section("getinfo at all levels")
do
  local function describe(level)
    local out = {}
    while true do
      local info = debug.getinfo(level, "nSluf")
      if not info then break end
      out[#out + 1] = string.format("%s/%s/%s/%s/%s/%s", tostring(info.name),
        info.what, info.short_src, tostring(info.currentline),
        tostring(info.nups), tostring(info.func ~= nil))
      level = level + 1
    end
    return out
  end
  local function a() return describe(1) end
  local function b() local r = a(); return r end
  local function c() return pcall(b) end -- through a C function
  local ok, r = c()
  check(ok, r)
  for i = 1, #r do log(i, r[i]) end
  -- getinfo on functions
  local info = debug.getinfo(print)
  log("print", info.what, info.short_src, info.source, info.currentline, info.linedefined)
  info = debug.getinfo(describe, "S")
  log("describe", info.what, info.short_src, info.linedefined, info.lastlinedefined)
  info = debug.getinfo(1, "L")
  log("activelines is table", type(info.activelines))
  log(pcall(debug.getinfo, 1, ">"))
  log(debug.getinfo(1000))
end

T.section("getlocal/setlocal")
do
  local function f(a, b, ...)
    local x = a + b
    local names = {}
    for i = 1, 10 do
      local name, val = debug.getlocal(1, i)
      if not name then break end
      names[#names + 1] = name .. "=" .. T.show(val)
    end
    -- varargs via negative indices
    local va = {}
    for i = 1, 5 do
      local name, val = debug.getlocal(1, -i)
      if not name then break end
      va[#va + 1] = name .. "=" .. T.show(val)
    end
    debug.setlocal(1, 3, 100) -- x
    return table.concat(names, " "), table.concat(va, " "), x
  end
  log(f(1, 2, "v1", "v2", 3))
  -- locals of a caller, modified from the callee
  local function callee()
    local n1, v1 = debug.getlocal(2, 1)
    debug.setlocal(2, 1, v1 * 10)
    return n1
  end
  local function caller()
    local mine = 7
    local n = callee()
    return n, mine
  end
  log(caller())
  -- locals of a suspended coroutine
  local co = coroutine.create(function(p)
    local q = p * 2
    coroutine.yield()
    return q
  end)
  coroutine.resume(co, 21)
  log("co locals", debug.getlocal(co, 1, 1), debug.getlocal(co, 1, 2))
  debug.setlocal(co, 1, 2, 99)
  log("co result", coroutine.resume(co))
  -- parameter names of a function
  log("params", debug.getlocal(f, 1), debug.getlocal(f, 2), debug.getlocal(f, 3))
  log(pcall(debug.getlocal, 50, 1))
end

T.section("upvalues")
do
  local u1, u2 = 10, "s"
  local function g() return u1, u2 end
  log(debug.getupvalue(g, 1), debug.getupvalue(g, 2), debug.getupvalue(g, 3))
  debug.setupvalue(g, 1, 20)
  log(g(), u1)
  local function h() return u1 end
  log("same upvalue", debug.upvalueid(g, 1) == debug.upvalueid(h, 1),
      debug.upvalueid(g, 1) == debug.upvalueid(g, 2))
  local x = 1
  local function k() return x end
  debug.upvaluejoin(k, 1, g, 2)
  log("joined", k())
  log("C upvalues", debug.getupvalue(string.gmatch("a", "a"), 1) ~= nil)
end

T.section("getinfo from metamethods and tail calls")
do
  local seen = {}
  local mt = { __index = function(t, k)
    local i1 = debug.getinfo(1, "n")
    local i2 = debug.getinfo(2, "Sl")
    seen[#seen + 1] = tostring(i1.name) .. "/" .. tostring(i1.namewhat) .. "@" .. i2.currentline
    return k
  end, __add = function(a, b)
    local i1 = debug.getinfo(1, "n")
    seen[#seen + 1] = tostring(i1.name) .. "/" .. tostring(i1.namewhat)
    return 0
  end }
  local t = setmetatable({}, mt)
  local _ = t.foo
  _ = t + 1
  local function tail() return debug.traceback("tail", 1) end
  local function via() return tail() end
  log(table.concat(seen, " "))
  log((via():gsub("0x%x+", "0x?"):gsub("\n", "|")))
  local function tail2() local i = debug.getinfo(2, "nSl"); return i.what .. "/" .. tostring(i.name) end
  local function via2() return tail2() end
  log(via2())
end

T.section("debug metatable and environment functions")
do
  local mt = {}
  debug.setmetatable(10, mt)
  mt.__index = function(n, k) return k .. n end
  log((5).x)
  debug.setmetatable(10, nil)
  log(pcall(function() return (5).x end))
  local function envf() return envvar end
  debug.setfenv(envf, { envvar = "from env" })
  log(envf(), debug.getfenv(envf).envvar)
end

T.done("debug_info")
