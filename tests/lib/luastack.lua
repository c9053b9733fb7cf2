-- Reads the size of a thread's Lua stack from the VM's own lua_State, so a
-- program can check that the GC really shrank a stack (lj_state_shrinkstack
-- has no Lua-visible effect). Used by tests/frames/stackshrink.lua and
-- tests/torture/progs/stack_shrink.lua:
--   local S = dofile(".../tests/lib/luastack.lua")
--   local h = S.handle(co)      -- a coroutine; S.main() for the main thread
--   S.slots(h)                  -- its stack size in slots, now
--
-- lua_State (lj_obj.h), x64 GC64: GCHeader (nextgc; marked, gct at byte 9),
-- dummy_ffid, status, then from byte 16 one word each: glref, gclist, base,
-- top, maxstack, stack. maxstack - stack is the stack size less
-- LJ_STACK_EXTRA+1 slots. The ljperf patch (today) adds fields only after
-- cframe, so these offsets hold on the patched and the control VM; every
-- read is checked against invariants (all threads share glref and gct, the
-- stack is ordered and no larger than LUAI_MAXSTACK), and a mismatch raises
-- an error naming it instead of returning a wrong size.
local ffi = require("ffi")
local S = {}

local GLREF, BASE, TOP, MAXSTACK, STACK = 2, 4, 5, 6, 7  -- word indexes
local GCT = 9                                            -- byte offset
local MAXSLOTS = 65500 + 1000  -- LUAI_MAXSTACK and the overflow margin

local function words(a) return ffi.cast("const int64_t *", a) end

-- The address of a thread object, from tostring ("thread: 0x...").
local function address(th)
  local hex = tostring(th):match("^thread: 0x(%x+)$")
  if not hex then error("luastack: not a thread: " .. tostring(th), 3) end
  return tonumber(hex, 16)
end

local ref  -- glref and gct every thread must share, from the first handle

local function sane(a)
  local w = words(a)
  if ref and (w[GLREF] ~= ref.g or ffi.cast("const uint8_t *", a)[GCT] ~= ref.gct) then
    return false, "glref/gct differ from the first thread's"
  end
  local st, mx = w[STACK], w[MAXSTACK]
  if st == 0 or st % 8 ~= 0 or mx % 8 ~= 0 then return false, "stack not aligned" end
  local n = tonumber(mx - st) / 8
  if n < 1 or n > MAXSLOTS then return false, "stack of " .. n .. " slots" end
  -- base and top of a suspended thread lie in its stack; the running
  -- thread's may be stale by a few slots above, never below the stack
  if w[BASE] < st or w[TOP] < st then return false, "base/top below the stack" end
  return true, n
end

local function checked(a, what)
  local ok, why = sane(a)
  if not ok then
    error("luastack: " .. what .. ": lua_State layout not recognised (" .. why .. ")", 3)
  end
  return why
end

-- A handle (address) for coroutine CO.
function S.handle(co)
  local a = address(co)
  if not ref then
    ref = { g = words(a)[GLREF], gct = ffi.cast("const uint8_t *", a)[GCT] }
  end
  checked(a, "coroutine")
  return a
end

-- A handle for the main thread, which Lua 5.1's coroutine.running() does
-- not return: GG_State begins with the main lua_State and global_State
-- follows it, so the main thread lies just below glref. The size of
-- lua_State differs between builds (the patch adds two fields): the first
-- candidate whose own glref points just above it and that passes the
-- checks is it.
function S.main()
  if not ref then S.handle(coroutine.create(function() end)) end
  local g = tonumber(ref.g)
  for size = 96, 256, 8 do
    local a = g - size
    if words(a)[GLREF] == ref.g and ffi.cast("const uint8_t *", a)[GCT] == ref.gct
       and sane(a) then
      return a
    end
  end
  error("luastack: main thread not found below its global_State", 2)
end

-- The stack size of the thread behind handle H, in slots (excluding the
-- LJ_STACK_EXTRA reserve).
function S.slots(h)
  return checked(h, "stack read")
end

return S
