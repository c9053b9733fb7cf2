-- __gc finalizers (newproxy userdata, ffi.gc cdata), errors inside them,
-- and full collections at depth (Lua recursion, coroutines, metamethods,
-- callbacks from C library functions).
--
-- Determinism: LuaJIT propagates an error raised by a finalizer out of
-- whatever GC step ran it. To make that point deterministic the automatic GC
-- is stopped while finalizable objects are pending; finalizers therefore only
-- run inside explicit collectgarbage() calls. (A full collection re-enables
-- the GC, hence stopgc() after every collect.)
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg
local ffi = require("ffi")

-- Erroring finalizers and the JIT: when a finalizer error aborts a full
-- collection, the GC stays in its finalize phase and LuaJIT runs the
-- remaining finalizers from the next trace exit (lj_trace_exit ->
-- lj_gc_step). An error thrown there crashes this LuaJIT version (err_unwind
-- with L == NULL below lj_vm_exit_handler; seen on the control VM, depends on
-- trace layout/addresses). Sections with erroring finalizers therefore run
-- with the JIT off and flushed (nojit/rejit); the others keep the JIT.
local JIT = jit.status()
local function nojit() jit.flush(); jit.off() end
local function rejit() if JIT then jit.on() end end

local function stopgc() collectgarbage("stop") end
local function fullgc() collectgarbage("collect"); stopgc() end

local ran = {}      -- ids of finalizers that ran
local function sorted_ids()
  local t = {}
  for i = 1, #ran do t[i] = tostring(ran[i]) end
  table.sort(t)
  return table.concat(t, ",")
end

-- Userdata with a finalizer; behaviour selected by kind.
local function proxy(id, kind)
  local p = newproxy(true)
  getmetatable(p).__gc = function(u)
    ran[#ran + 1] = id
    if kind == "error" then error("finalizer " .. id .. " failed")
    elseif kind == "tableerr" then error({ fin = id })
    elseif kind == "deep" then
      local function d(n) if n == 0 then error("deep fin " .. id) end d(n - 1) end
      d(200)
    elseif kind == "runtime" then local z = nil; return z.x
    elseif kind == "collect" then collectgarbage() -- nested full GC inside __gc
    elseif kind == "pcall" then
      local ok, e = pcall(error, "caught inside fin " .. id)
      ran[#ran] = id .. "(" .. msg(e) .. ")"
    end
  end
  return p
end

-- Run full collections until no finalizer error remains; return the errors.
local function drain()
  local errs = {}
  for _ = 1, 100 do
    local ok, e = pcall(fullgc)
    stopgc()
    if ok then break end
    errs[#errs + 1] = type(e) == "table" and ("table fin=" .. tostring(e.fin)) or msg(e)
  end
  table.sort(errs)
  return errs
end

stopgc()
fullgc()

T.section("plain finalizers")
do
  for i = 1, 50 do proxy(i, "plain") end
  fullgc()
  log("ran", #ran, sorted_ids())
  eq(#ran, 50, "all finalizers ran")
  ran = {}
  local keep = {}
  for i = 1, 20 do keep[i] = proxy(100 + i, "plain") end
  for i = 1, 20, 2 do keep[i] = nil end
  fullgc()
  log("half", #ran, sorted_ids())
  eq(#ran, 10, "only unreachable finalized")
  keep = nil
  fullgc()
  log("rest", #ran)
  eq(#ran, 20, "rest finalized")
  ran = {}
end

T.section("finalizer errors propagate out of collectgarbage")
nojit()
do
  local kinds = { "error", "plain", "tableerr", "deep", "runtime", "pcall", "collect", "plain" }
  for i = 1, #kinds do proxy(i, kinds[i]) end
  local errs = drain()
  for i = 1, #errs do log("err", errs[i]) end
  log("ran", #ran, sorted_ids())
  eq(#ran, #kinds, "every finalizer ran once")
  ran = {}
end
rejit()

T.section("collectgarbage at depth")
do
  local function rec(n, f)
    if n == 0 then return f() end
    local a, b, c = n, n * 2, tostring(n)
    local r = rec(n - 1, f)
    check(a == n and b == n * 2 and c == tostring(n), "locals intact")
    return r + 1
  end
  for _, depth in ipairs({ 10, 200, 800 }) do
    for i = 1, 5 do proxy(depth * 10 + i, "plain") end
    local r = rec(depth, function() fullgc(); return 0 end)
    eq(r, depth, "rec result")
  end
  log("ran at depth", #ran, sorted_ids())
  ran = {}
  -- a finalizer error raised at depth, caught half-way up
  local function rec2(n)
    if n == 0 then fullgc(); return "no error" end
    if n == 150 then
      local ok, e = pcall(rec2, n - 1)
      return ok and e or ("caught@150: " .. msg(e))
    end
    return rec2(n - 1) .. ""
  end
  nojit()
  proxy("d1", "error")
  log(rec2(300))
  drain()
  rejit()
  ran = {}
end

T.section("collectgarbage inside coroutines, metamethods and C callbacks")
do
  local co = coroutine.wrap(function(n)
    local function deep(k)
      if k == 0 then
        proxy("co" .. n, "plain")
        fullgc()
        n = coroutine.yield(n)
        fullgc()
        return n
      end
      return deep(k - 1) + 0
    end
    while true do n = deep(100) end
  end)
  for i = 1, 5 do co(i) end
  log("co ran", sorted_ids())
  ran = {}
  local mt = { __index = function(t, k) proxy("mm" .. k, "plain"); fullgc(); return k end }
  local t = setmetatable({}, mt)
  local s = 0
  for i = 1, 10 do s = s + t[i] end
  log("mm", s, sorted_ids())
  ran = {}
  local arr = {}
  for i = 1, 30 do arr[i] = (i * 7919) % 29 end
  table.sort(arr, function(a, b)
    if a == 0 or b == 0 then fullgc() end
    return a < b
  end)
  log("sorted", table.concat(arr, " ", 1, 10))
  local r = ("abcabc"):gsub("b", function(c) proxy("gs", "plain"); fullgc(); return "B" end)
  log("gsub", r, sorted_ids())
  ran = {}
end

T.section("ffi.gc cdata finalizers")
do
  ffi.cdef [[
    void *malloc(size_t size);
    void free(void *ptr);
  ]]
  local freed = 0
  -- Garbage is made in a separate function so that no stale stack slot of
  -- the frame calling fullgc() can keep the last object alive.
  local function make()
    for i = 1, 40 do
      local p = ffi.gc(ffi.C.malloc(64), function(p) ffi.C.free(p); freed = freed + 1 end)
    end
    for i = 1, 40 do ffi.gc(ffi.C.malloc(32), ffi.C.free) end -- C function as finalizer
  end
  make()
  fullgc()
  log("freed", freed)
  eq(freed, 40, "ffi.gc lua finalizers")
  -- cdata finalizer errors
  nojit()
  local runs = {}
  for i = 1, 6 do
    ffi.gc(ffi.new("int[4]", i), function(c)
      runs[#runs + 1] = c[0]
      if c[0] % 2 == 0 then error("cdata fin " .. c[0]) end
    end)
  end
  local errs = drain()
  table.sort(runs)
  log("cdata runs", table.concat(runs, ","))
  for i = 1, #errs do log("cdata err", errs[i]) end
  eq(#runs, 6, "cdata finalizers")
  rejit()
  -- removing a finalizer, replacing a finalizer
  local hit = {}
  local c1 = ffi.gc(ffi.new("int[1]"), function() hit[#hit + 1] = "c1" end)
  local c2 = ffi.gc(ffi.new("int[1]"), function() hit[#hit + 1] = "c2-old" end)
  ffi.gc(c1, nil)
  ffi.gc(c2, function() hit[#hit + 1] = "c2-new" end)
  c1, c2 = nil, nil
  fullgc()
  table.sort(hit)
  log("replaced", table.concat(hit, ","))
  -- finalizer of a cdata that is resurrected by its finalizer
  local saved
  ffi.gc(ffi.new("int[1]", 77), function(c) saved = c end)
  fullgc()
  log("resurrected", saved ~= nil and saved[0])
  saved = nil
  fullgc()
end

T.section("many objects with finalizers interleaved with garbage")
do
  local count = 0
  local chain = {}
  local function make()
    for i = 1, 100 do
      local p = newproxy(true)
      getmetatable(p).__gc = function() count = count + 1 end
      if i % 10 == 0 then chain[#chain + 1] = p end
      local junk = { i, tostring(i), { i } }
    end
  end
  for round = 1, 20 do
    make()
    if round % 5 == 0 then fullgc() end
  end
  log("finalized", count, "kept", #chain)
  eq(count, 2000 - 200, "finalized count")
  chain = nil
  fullgc()
  eq(count, 2000, "all finalized")
end

collectgarbage("restart")
T.done("gc_finalizers")
