-- Every kind of call frame and transition between them: Lua, vararg (with
-- frame delta), C functions, fast functions, continuation frames of
-- metamethods, pcall/xpcall frames; tail calls between all of them
-- (Lua -> Lua, Lua -> C, Lua -> __call, vararg -> fixarg and back), huge
-- argument lists, and returns with many results through each frame type.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

T.section("tail calls")
do
  local function tc_lua(n, acc) if n == 0 then return acc end return tc_lua(n - 1, acc + 1) end
  log("lua->lua", tc_lua(300000, 0))
  local function tc_c(n) if n == 0 then return select("#", 1, 2, 3) end return tc_c(n - 1) end
  log("lua->C", tc_c(1000))
  local function tc_ff(s) return string.upper(s) end
  log("lua->ff", tc_ff("abc"), (function() return tostring(12) end)())
  local callable = setmetatable({}, { __call = function(self, n, acc)
    return n, acc
  end })
  local function tc_call(n) return callable(n, "via __call") end
  log("lua->__call", tc_call(5))
  -- vararg functions tail calling fixarg functions and back with changing
  -- argument counts (frame delta adjustments)
  local va, fix
  function va(n, ...)
    if n == 0 then return select("#", ...), ... end
    if n % 2 == 0 then return fix(n - 1, select("#", ...), ...) end
    return va(n - 1, n, ...)
  end
  function fix(n, cnt, a, b)
    return va(n, a, b, cnt)
  end
  log("va/fix", va(40))
  -- tail call into pcall and xpcall
  local function tp(n) return pcall(function(x) return x * 2 end, n) end
  log("tail pcall", tp(21))
  local function txp(n) return xpcall(error, function(e) return "h:" .. e end, n) end
  log("tail xpcall", txp("m"))
  -- tail call to a non-function: error names the call
  local function tbad() local x = 1; return x() end
  log(pcall(tbad))
  -- tail call from a coroutine body to coroutine.yield
  local co = coroutine.wrap(function(a) return coroutine.yield(a + 1) end)
  log("tail yield", co(1), co("done"))
  -- deep mix: each level alternates tail and non-tail calls
  local function mix(n)
    if n == 0 then return 0 end
    if n % 2 == 0 then return mix(n - 1) end
    return mix(n - 1) + 1
  end
  log("mix", mix(20001))
end

T.section("many arguments and results")
do
  local function args(...) return select("#", ...) end
  local code = {}
  code[#code + 1] = "local f = ... return f("
  for i = 1, 240 do code[#code + 1] = (i > 1 and "," or "") .. i end
  code[#code + 1] = ")"
  local call240 = assert(loadstring(table.concat(code)))
  log("240 literal args", call240(args))
  -- a function with 200 fixed parameters
  local params = {}
  for i = 1, 200 do params[i] = "p" .. i end
  local big = assert(loadstring("return function(" .. table.concat(params, ",") ..
    ") return p1 + p100 + p200, " .. table.concat(params, "+") .. " end"))()
  local vals = {}
  for i = 1, 200 do vals[i] = i end
  log("200 params", big(unpack(vals)))
  log("200 params short", pcall(big, 1, 2))
  -- returns through each frame type
  local function ret(n) local t = {} for i = 1, n do t[i] = i end return unpack(t) end
  local function through_pcall(n) return select("#", pcall(ret, n)) end
  local function through_co(n)
    return select("#", coroutine.wrap(function() return ret(n) end)())
  end
  local mt = { __index = function(t, k) return ret(k) end }
  local function through_mm(n) local t = setmetatable({}, mt); return t[n] end
  log("results", through_pcall(1000), through_co(1000), through_mm(1000))
end

T.section("continuation frames (metamethods) inside each other")
do
  local log_ = {}
  local mt = {}
  mt.__index = function(t, k)
    log_[#log_ + 1] = "i" .. k
    if k > 0 then return t[k - 1] + 1 end -- recursive metamethod chain
    return 0
  end
  mt.__add = function(a, b)
    local av = type(a) == "table" and a[3] or a
    local bv = type(b) == "table" and b[2] or b
    return av + bv
  end
  mt.__concat = function(a, b)
    return (type(a) == "table" and "T" or a) .. (type(b) == "table" and "T" .. (b + 1) or b)
  end
  mt.__lt = function(a, b) return (a + 0) < (b + 0) end
  mt.__le = function(a, b) return not (b < a) end
  mt.__eq = function(a, b) return a[1] == b[1] end
  local x = setmetatable({}, mt)
  local y = setmetatable({}, mt)
  log("index chain", x[50])
  log("add", x + 1, 1 + x)
  log("concat", "a" .. x, x .. "b", "a" .. x .. "b" .. x)
  log("cmp", x < y, x <= y, x == y, x ~= y)
  log("count", #log_)
  -- a metamethod that errors in the middle of a concat chain
  local bad = setmetatable({}, { __concat = function(a, b) error("no concat") end })
  log(pcall(function() return "a" .. "b" .. bad .. "c" end))
  -- __newindex in a loop with rawset fallbacks
  local store = {}
  local prox = setmetatable({}, { __newindex = function(t, k, v)
    if k % 2 == 0 then rawset(t, k, v) else store[k] = v end
  end, __index = store })
  for i = 1, 100 do prox[i] = i end
  local s = 0
  for i = 1, 100 do s = s + prox[i] end
  log("newindex", s, rawget(prox, 1), rawget(prox, 2))
end

T.section("fast functions falling back to C and errors inside them")
do
  local ok, e
  log(pcall(math.floor, "1.5"), pcall(math.floor, "x"))
  log(pcall(string.byte, "abc", 1, 3), pcall(string.byte, {}, 1))
  log(pcall(select, "#"), pcall(select, "x"))
  log(pcall(rawget, {}, nil), pcall(rawget, 1, 1))
  log(pcall(setmetatable, {}, 1), pcall(getmetatable, nil))
  log(pcall(tostring), pcall(tonumber))
  log(pcall(ipairs, nil), pcall(pairs, nil))
  log(pcall(assert, false, "assert msg"), pcall(assert, nil), pcall(assert, 1, 2, 3))
  log(pcall(bit.tobit, "x"), bit.tobit(2 ^ 32 + 5), bit.tohex(255, -4))
  log(pcall(math.max), math.max(3, 9, -1), math.min(3, 9, -1))
  log(pcall(coroutine.wrap, 1), pcall(coroutine.resume, coroutine.running()))
  log(pcall(unpack, {}, 1, -1), pcall(string.sub))
  -- fast functions in hot loops with occasional bad arguments
  local errs, s = 0, 0
  for i = 1, 30000 do
    local v = (i % 1000 == 0) and "bad" or i + 0.5
    local ok2, r = pcall(math.floor, v)
    if ok2 then s = s + r else errs = errs + 1 end
  end
  log("hot ff", s, errs)
end

T.done("frames_calls")
