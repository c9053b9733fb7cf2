-- Dynamic code: load/loadstring with chunk names and readers, string.dump
-- (stripped and not) and reloading, syntax errors, runtime errors in loaded
-- chunks, setfenv/getfenv, generated functions with many constants/locals.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

T.section("chunk names and errors in loaded chunks")
do
  local cases = {
    { "return 1 +", "=syntax" },
    { "x = = 1", "@virtual/file.lua" },
    { "local t = nil\nreturn t.x", "=runtime" },
    { "error('from chunk')", "chunkname-as-string" },
    { "return ...", "=varargs" },
    { "for i=1,3 do end end", "=extra end" },
    { "return '\\300'", "=bad escape" },
    { ("x = 1\n"):rep(3) .. "return x +* 2", "@long/" .. ("d"):rep(80) .. ".lua" },
  }
  for i, c in ipairs(cases) do
    local f, e = loadstring(c[1], c[2])
    if not f then
      log(i, "compile", msg(e))
    else
      log(i, "run", pcall(f, "a", "b"))
    end
  end
  -- load with a reader function returning pieces, nil, and errors
  local pieces = { "local a", " = 4", "0 + 2 ", "return a" }
  local k = 0
  local f = load(function() k = k + 1; return pieces[k] end, "=pieces")
  log("reader", f())
  log(pcall(load, function() return {} end))
  log(load(function() return nil end))
end

T.section("string.dump round trips")
do
  local function make(n)
    local up = n
    return function(a, ...)
      local t = { ... }
      local s = 0
      for i = 1, #t do s = s + t[i] end
      return a * 2 + s + (up or 0), select("#", ...)
    end
  end
  local f = make(5)
  for _, strip in ipairs({ false, true }) do
    local bc = string.dump(f, strip)
    local g = assert(loadstring(bc, "=dumped"))
    log("strip", strip, g(10, 1, 2, 3)) -- upvalue is nil after reload
    -- errors inside dumped code: stripped code has no line info
    local bad = string.dump(function(x) return x.field end, strip)
    log("err", strip, pcall(assert(loadstring(bad, "=dumped-bad")), nil))
  end
  log(pcall(string.dump, print))
  log(loadstring("\27LJ\2garbage"))
end

T.section("environments")
do
  local env = { tostring = tostring, x = 10 }
  local f = loadstring("y = x * 2; return tostring(y)")
  setfenv(f, env)
  log(f(), env.y, rawget(_G, "y"))
  local function getenv_level() return getfenv(2).marker end
  local g = loadstring("return f()")
  setfenv(g, { f = getenv_level, marker = "env-of-g" })
  log(g())
  log(pcall(setfenv, 100, {}))
  log(getfenv(print) == _G, getfenv(0) == _G)
end

T.section("generated functions: many constants, locals, upvalues")
do
  local src = { "local r = 0" }
  for i = 1, 190 do src[#src + 1] = ("local v%d = %d.5"):format(i, i) end
  src[#src + 1] = "r = v1"
  for i = 2, 190 do src[#src + 1] = ("r = r + v%d"):format(i) end
  src[#src + 1] = "return r"
  local f = assert(loadstring(table.concat(src, "\n")))
  log("190 locals", f())
  local cs = { "local t = {}" }
  for i = 1, 3000 do cs[#cs + 1] = ("t[%d] = 'c%d'"):format(i, i) end
  cs[#cs + 1] = "return #t, t[1], t[3000]"
  log("3000 constants", assert(loadstring(table.concat(cs, "\n")))())
  log("too many locals", (loadstring(("local a" .. (" , a"):rep(250)))) == nil)
  -- upvalues: 60 levels of enclosing functions referencing a top local
  local parts = { "local top = 7 " }
  for i = 1, 60 do parts[#parts + 1] = "return (function() " end
  parts[#parts + 1] = "return top"
  for i = 1, 60 do parts[#parts + 1] = " end)()" end
  log("60 nested", assert(loadstring(table.concat(parts)))())
  -- many compiled chunks in a hot loop
  local s = 0
  for i = 1, 2000 do
    s = s + assert(loadstring("return " .. i .. " * 2"))()
  end
  log("loop chunks", s)
end

T.done("load_dump")
