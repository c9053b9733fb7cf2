-- Workloads for fpwalk-host: each global function is one unit of work,
-- called repeatedly until its workload has its samples.
local ffi = require("ffi")
ffi.cdef[[int host_each(int n, int (*cb)(int));]]

-- A leaf loop under a recursion, loaded twice so that the copies are
-- separate prototypes: jit.off holds one in the interpreter, the JIT
-- compiles the other.
local RECURSION = [[
local function spin(n)
  local x = 0
  for i = 1, n do x = (x * 33 + i) % 1000003 end
  return x
end
local function down(d)
  if d == 0 then return spin(300) end
  return down(d - 1) + 1  -- not a tail call: d frames stay on the stack
end
return down, spin
]]
local chunk_i = assert(loadstring(RECURSION, "=recursion_interp"))
jit.off(chunk_i, true)
local down_i = chunk_i()
local down_j, spin_j = assert(loadstring(RECURSION, "=recursion_jit"))()

function rec_interp() return down_i(60) end

-- Recording switched from Lua (jit.perf, vm_patch 0009), checked by status().
function perf_on()
  local perf = require("jit.perf")
  assert(perf.start("frames") and perf.status().frames, "jit.perf.start")
  return rec_interp()
end
function perf_off()
  local perf = require("jit.perf")
  assert(perf.stop("frames") and not perf.status().frames, "jit.perf.stop")
  return rec_interp()
end
function rec_jit() return down_j(60) end

local co = coroutine.wrap(function()
  while true do
    local x = 0
    for i = 1, 200 do x = x + i % 7 end
    coroutine.yield(x)
  end
end)
function coro()
  for _ = 1, 50 do co() end
end

local cb = ffi.cast("int (*)(int)", function(i) return spin_j(20) + i end)
-- Not tail calls (local r = ...): each caller keeps its Lua frame.
function ffi_cb() local r = ffi.C.host_each(50, cb) return r end

function hot()
  local s = 0
  for i = 1, 200000 do s = s + math.sqrt(i) * 0.5 end
  return s
end

local function inner() local r = spin_j(500) return r end
local function middle() local r = host_call(inner) return r end
function sandwich() local r = host_call(middle) return r end

local t = {}
local function less(a, b) return a < b end
local function bad(a, b) error("stop") end
local function up(c) return c:upper() end
function lib_callbacks()
  for i = 1, 200 do t[i] = (i * 7919) % 211 end
  table.sort(t, less)
  local s = string.rep("abc", 100):gsub("b", up)
  assert(not pcall(table.sort, t, bad))
  assert(not pcall(string.gsub, s, "a", bad))
end

function deep_recursion() return down_i(300) end

-- Errors raised 20 Lua frames deep and caught by pcall, then a recursion
-- in the interpreter: its chains show whether unwinding kept count.
local function thrower(d)
  if d == 0 then error("deep") end
  return thrower(d - 1) + 1
end
function lua_errors()
  for _ = 1, 20 do assert(not pcall(thrower, 20)) end
  local r = down_i(20) return r
end

-- Recording switched on and off (host_fpwin, host_fpwin_ffi) over and over
-- under a recursion deeper than the cap, in coroutines, from trace code,
-- and between errors caught by pcall; every result is checked.
ffi.cdef[[int host_fpwin_ffi(int on);]]
local fpwin, fpwin_ffi = host_fpwin, ffi.C.host_fpwin_ffi
local function tdown(d, k)
  if d == 0 then fpwin(k % 2) return spin_j(30) end
  local r = tdown(d - 1, k) + 1
  if d % 7 == 0 then fpwin((k + d) % 2) end
  return r
end
local function tthrow(d, k)
  if d == 0 then fpwin(k % 2) error("t" .. k) end
  return tthrow(d - 1, k) + 1
end
local tco = coroutine.wrap(function()
  local k = 0
  while true do
    k = k + 1
    fpwin(k % 2)
    local r = tdown(10 + k % 30, k)
    coroutine.yield(r)
  end
end)
local s30 = spin_j(30)
function switch_torture()
  for k = 1, 8 do
    local d = 20 + 5 * k
    assert(tdown(d, k) == s30 + d, "tdown")
    local ok, e = pcall(tthrow, 25 + k, k)
    assert(not ok and e:match("t" .. k .. "$"), "tthrow")
    local r = tco()
    assert(r >= s30 + 10 and r < s30 + 40, "coroutine")
  end
  local s = 0
  for i = 1, 3000 do  -- a trace that switches through the FFI
    if i % 100 == 0 then fpwin_ffi(i % 200 == 0 and 1 or 0) end
    s = s + (i % 13)
  end
  assert(s == 17995, "trace loop " .. s)
  fpwin(1)
end
