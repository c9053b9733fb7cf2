-- Everything nested inside everything: coroutines inside sort comparators
-- inside gsub callbacks inside metamethods inside FFI callbacks inside
-- xpcall handlers..., with errors and yields at the innermost level, full GC
-- cycles in the middle, and a deterministic random walk over nesting orders.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg
local ffi = require("ffi")

ffi.cdef [[
typedef int (*tl_cb1)(int x);
int tl_deep_cb(tl_cb1 cb, int depth);
]]
local C = ffi.load(assert(os.getenv("TORTURE_FFILIB"), "TORTURE_FFILIB not set"))

-- Wrappers: each runs f() inside one kind of boundary and returns its
-- result (a number), propagating errors.
local wrappers = {}
local names = {}
local function add(name, w) wrappers[#wrappers + 1] = w; names[#names + 1] = name end

add("pcall", function(f)
  local ok, v = pcall(f)
  if not ok then error(v, 0) end
  return v
end)
add("xpcall", function(f)
  local ok, v = xpcall(f, function(e) return e end)
  if not ok then error(v, 0) end
  return v
end)
add("coroutine", function(f)
  local co = coroutine.create(f)
  local ok, v = coroutine.resume(co)
  if not ok then error(v, 0) end
  -- f may yield a partial value; resume until it finishes
  while coroutine.status(co) ~= "dead" do
    ok, v = coroutine.resume(co, v)
    if not ok then error(v, 0) end
  end
  return v
end)
add("sort", function(f)
  local v
  table.sort({ 2, 1 }, function(a, b) if not v then v = f() end return a < b end)
  return v
end)
add("gsub", function(f)
  local v
  ("x"):gsub("x", function() v = f() end)
  return v
end)
add("__index", function(f)
  return setmetatable({}, { __index = function() return f() end }).k
end)
add("__add", function(f)
  return setmetatable({}, { __add = function() return f() end }) + 1
end)
add("__concat", function(f)
  local v
  local _ = "a" .. setmetatable({}, { __concat = function() v = f(); return "" end })
  return v
end)
add("ffi-callback", function(f)
  local v, err
  local cb = ffi.cast("tl_cb1", function(x)
    local ok, r = pcall(f)
    if ok then v = r else err = r end
    return 0
  end)
  local run = function() return C.tl_deep_cb(cb, 2) end
  jit.off(run)
  run()
  cb:free()
  if err then error(err, 0) end -- re-raised outside the C frames
  return v
end)
add("recursion", function(f)
  local function r(n) if n == 0 then return f() end return r(n - 1) + 0 end
  return r(60)
end)
add("dofile-chunk", function(f)
  local chunk = loadstring("local f = ... return f()", "=chunk")
  return chunk(f)
end)
add("gc", function(f)
  collectgarbage()
  local v = f()
  collectgarbage("step")
  return v
end)

-- Innermost actions.
local function innermost(kind, n)
  if kind == 0 then return n end
  if kind == 1 then error("inner error " .. n, 0) end
  if kind == 2 then
    -- yield if inside a coroutine that allows it, else plain value
    local co = coroutine.running()
    if co then
      local ok, v = pcall(coroutine.yield, n)
      if ok then return v + 1 end
    end
    return n + 1
  end
  if kind == 3 then local t = nil; return t.x end
end

local seed = 2024
local function rnd(k)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return math.floor(seed / 65536) % k
end

T.section("random nesting walks")
local hist = {}
for trial = 1, 400 do
  local depth = 1 + rnd(6)
  local chain = {}
  for i = 1, depth do chain[i] = 1 + rnd(#wrappers) end
  local kind = rnd(4)
  local function build(i)
    if i > depth then return function() return innermost(kind, trial) end end
    local inner = build(i + 1)
    local w = wrappers[chain[i]]
    return function() return w(inner) end
  end
  local ok, v = pcall(build(1))
  local desc = {}
  for i = 1, depth do desc[i] = names[chain[i]] end
  local line = table.concat(desc, ">") .. " kind" .. kind .. " -> " .. tostring(ok) .. " " .. msg(v)
  hist[#hist + 1] = line
  if trial % 20 == 0 then log(trial, line) end
end
log("hash", T.hash(nil, table.concat(hist, "\n")))

T.section("yield across every yieldable boundary")
do
  local yieldable = { "pcall", "xpcall", "__index", "__add", "__concat", "recursion", "dofile-chunk" }
  for _, name in ipairs(yieldable) do
    local w
    for i = 1, #names do if names[i] == name then w = wrappers[i] end end
    local co = coroutine.create(function()
      return w(function()
        local a = coroutine.yield("y1")
        local b = coroutine.yield("y2")
        return a + b
      end)
    end)
    local r = {}
    local ok, v = coroutine.resume(co)
    r[#r + 1] = tostring(v)
    ok, v = coroutine.resume(co, 20)
    r[#r + 1] = tostring(v)
    ok, v = coroutine.resume(co, 22)
    r[#r + 1] = tostring(ok) .. ":" .. tostring(v)
    log(name, table.concat(r, " "), coroutine.status(co))
  end
end

T.done("nesting_chaos")
