-- A program started without LUAJIT_PERF and with no profiling code: `ljperf
-- record -p` switches recording on in it and off again. It prints its
-- jit.perf.status() and its speed every 0.1 s, and BAD if a result changes.
-- arg[1]: seconds to run (default, or "-": until killed). arg[2]: seconds
-- to spin in one C call first, right after "ready" (no safe point there:
-- the switch waits for its end).
local cmod = require("cmod")
local perf = require("jit.perf")
local limit = tonumber(arg and arg[1])
local spin = tonumber(arg and arg[2])
local function rec(d, n) if d == 0 then return cmod.spin(n) + 0 end return rec(d - 1, n) + 0 end
local function work(n)  -- allocates: its GC steps are where the switch happens
  local t = {}
  for i = 1, 40 do t[i] = ("x"):rep(i) .. i end
  return rec(6, n) + #t
end
local function spin_iterations(seconds)  -- cmod.spin's iterations per SECONDS
  local t = os.clock()
  cmod.spin(1e7)
  return math.floor(seconds * 1e7 / math.max(os.clock() - t, 1e-6))
end
local first = spin and spin_iterations(spin)
io.stdout:setvbuf("line")
local expect, iters, t0, start = nil, 0, os.clock(), os.clock()
print("ready")
if first then cmod.spin(first) end
while not limit or os.clock() - start < limit do
  local v = work(20000)
  if expect == nil then expect = v elseif v ~= expect then print("BAD " .. v) end
  iters = iters + 1
  local t = os.clock()
  if t - t0 >= 0.1 then
    local st = perf.status()
    print(string.format("status map=%s jitdump=%s frames=%s remote=%s rate=%.0f",
      tostring(st.map), tostring(st.jitdump), tostring(st.frames), tostring(st.remote),
      iters / (t - t0)))
    iters, t0 = 0, t
  end
end
print("done")
