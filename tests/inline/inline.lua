-- Workloads for inlined trace frames (tests/inline/test_inline.py), JIT on.
-- usage: luajit inline.lua FFILIB CMODDIR [SECONDS [ROUNDS]]
-- Prints one line per phase; the first ("costs") is the ground truth: the
-- time per call of f1, f2 and f3 measured alone, each in its own loop.
-- ROUNDS (default 1) runs the phases again, with the traces of the first
-- round, each round after a line "round N".
local ffi = require("ffi")
ffi.cdef[[double ffilib_spin(long n); double ffilib_frameless(double y, long n); double ffilib_tiny(double y);]]
local lib = ffi.load(assert(arg[1], "usage: inline.lua FFILIB CMODDIR [SECONDS]"))
package.cpath = assert(arg[2]) .. "/?.so;" .. package.cpath
local cmod = require("cmod")
local SECONDS = tonumber(arg[3]) or 1.5
local ROUNDS = tonumber(arg[4]) or 1
local clock = os.clock

-- Chains of 12, 24, 48 dependent multiply-adds (each call needs the last one's
-- result: costs add up); long, so a sample's skid at a boundary weighs little.
local function f1(y)
  y = y * 0.99991 + 1; y = y * 0.99991 + 1; y = y * 0.99991 + 1; y = y * 0.99991 + 1; y = y * 0.99991 + 1; y = y * 0.99991 + 1
  y = y * 0.99991 + 1; y = y * 0.99991 + 1; y = y * 0.99991 + 1; y = y * 0.99991 + 1; y = y * 0.99991 + 1; y = y * 0.99991 + 1
  return y
end

local function f2(y)
  y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1
  y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1
  y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1
  y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1; y = y * 0.99992 + 1
  return y
end

local function f3(y)
  y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1
  y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1
  y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1
  y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1
  y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1
  y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1
  y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1
  y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1; y = y * 0.99993 + 1
  return y
end

-- Two levels: g2 inlines g1, which does the work.
local function g1(y)
  y = y * 0.99994 + 1; y = y * 0.99994 + 1; y = y * 0.99994 + 1
  y = y * 0.99994 + 1; y = y * 0.99994 + 1; y = y * 0.99994 + 1
  y = y * 0.99994 + 1; y = y * 0.99994 + 1; y = y * 0.99994 + 1
  return y
end
local function g2(y) return g1(y * 0.5) * 2 end

-- A C function (frame pointers) called through the FFI from inlined code.
local function fc(y) return lib.ffilib_spin(2000) + y * 0.5 end

-- C called from inlined code (trace call records): k1 calls libm, k2 a C
-- function without a frame pointer, k3 a tiny one. Each needs the result of
-- the one before: their costs add up.
local sin = math.sin
local function k1(y) return sin(y) * 0.5 + 1 end
local function k2(y) return lib.ffilib_frameless(y, 10) * 0.5 end
local function k3(y) return lib.ffilib_tiny(y) + 0 end  -- not a tail call

-- Side trace: h1 runs on a side exit of the loop's trace.
local function h1(y) return f2(y) * 0.5 end

-- Not inlined: its own loop is its own trace.
local function big(y)
  for _ = 1, 200 do y = y * 0.99995 + 1 end
  return y
end

-- Linked: linkloop's trace inlines mid, then jumps into inner's own loop
-- trace; mid's frame is made by the first trace (no record in the chain).
local function inner(y)
  for _ = 1, 200 do y = y * 0.99996 + 1 end
  return y
end
local function mid(y) return inner(y) * 0.5 end

-- Stitched: a Lua/C API function ends the trace; s1 runs in the next one.
local function s1(y) return f3(y) end

-- Phases: each loop is its own function (its own root trace).
local function only1(n) local y = 1 for _ = 1, n do y = f1(y) end return y end
local function only2(n) local y = 1 for _ = 1, n do y = f2(y) end return y end
local function only3(n) local y = 1 for _ = 1, n do y = f3(y) end return y end
local function none(n) local y = 1 for _ = 1, n do y = y + 1 end return y end

local function mix(n) local y = 1 for _ = 1, n do y = f3(f2(f1(y))) end return y end
local function onlyk1(n) local y = 1 for _ = 1, n do y = k1(y) end return y end
local function onlyk2(n) local y = 1 for _ = 1, n do y = k2(y) end return y end
local function onlyk3(n) local y = 1 for _ = 1, n do y = k3(y) end return y end
local function callmix(n) local y = 1 for _ = 1, n do y = k3(k2(k1(y))) end return y end
local function twolevel(n) local y = 1 for _ = 1, n do y = g2(y) end return y end
local function ffiloop(n) local y = 1 for _ = 1, n do y = fc(y) end return y end
local function sideloop(n)
  local y = 1
  for i = 1, n do if i % 4 == 0 then y = h1(y) else y = f1(y) end end
  return y
end
local function callloop(n) local y = 1 for _ = 1, n do y = big(y) end return y end
local function linkloop(n) local y = 1 for _ = 1, n do y = mid(y) end return y end
local function stitchloop(n)
  local y = 1
  for _ = 1, n do y = s1(y) + cmod.spin(10) * 0 end
  return y
end
-- rinner's loop trace leaves at its end into a side trace that returns
-- below its start frame and does rmid's work there (f2, inlined).
local function rinner(n) local s = 0 for i = 1, n do s = s + i end return s end
local function rmid(n)
  local y = f2(rinner(n) * 1e-3)  -- not a tail call: rmid keeps its frame
  return y
end
local function retloop(n) local y = 0 for _ = 1, n do y = y + rmid(8) end return y end

-- The trace calls C in k3 (inlined), then leaves at the branch, in
-- exitloop's own frame, every other iteration (the phase runs with
-- hotexit=1000: an exit count is 8 bits, so no side trace is ever made).
local function exitloop(n)
  local y = 1
  for i = 1, n do
    y = k3(y)
    if i % 2 == 0 then y = y + 1 end
  end
  return y
end

-- Seconds per iteration of F over N iterations (the best of three).
local function timed(f, n)
  local best = math.huge
  for _ = 1, 3 do
    local t0 = clock()
    f(n)
    local t = clock() - t0
    if t < best then best = t end
  end
  return best / n
end

local function run(name, f, n)
  local t_end, calls = clock() + SECONDS, 0
  while clock() < t_end do f(n); calls = calls + 1 end
  print(("%s %d"):format(name, calls))
  io.stdout:flush()
end

-- run's own loop stays interpreted: each phase's loop trace is entered from
-- the phase's own frame (linkloop tests the other case).
jit.off(run)

local N = 200000
for round = 1, ROUNDS do
  if round > 1 then print("round " .. round) io.stdout:flush() end
  local t0 = timed(none, N)
  local c1, c2, c3 = timed(only1, N) - t0, timed(only2, N) - t0, timed(only3, N) - t0
  print(("costs f1=%.4g f2=%.4g f3=%.4g"):format(c1, c2, c3))
  local k1c, k2c, k3c = timed(onlyk1, N) - t0, timed(onlyk2, N) - t0, timed(onlyk3, N) - t0
  print(("callcosts k1=%.4g k2=%.4g k3=%.4g"):format(k1c, k2c, k3c))
  io.stdout:flush()
  run("mix", mix, N)
  run("callmix", callmix, N)
  run("twolevel", twolevel, N)
  run("ffiloop", ffiloop, 2000)
  run("sideloop", sideloop, N)
  run("callloop", callloop, 2000)
  run("linkloop", linkloop, 2000)
  run("stitchloop", stitchloop, 20000)
  run("retloop", retloop, N)
  jit.opt.start("hotexit=1000")
  run("exitloop", exitloop, N)
  jit.opt.start("hotexit=10")
end
