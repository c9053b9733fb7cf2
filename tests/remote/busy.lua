-- Busy code that reaches no poll of the remote switch by itself (no GC
-- step, no trace exit for seconds): `ljperf record -p` must still switch it
-- on within a second (the kick, docs/remote-switch.md). Started without
-- LUAJIT_PERF. arg[1]: the kind of loop; arg[2]: rounds. Prints "ready",
-- then per round a checksum line; the same arguments print the same lines
-- attached or not. Every loop runs under 8 frames of rec.
--   loop   a numeric loop (run -joff: the interpreter; JIT on: one trace
--          that loops without exit), 2e8 iterations per round
--   sunk   a loop whose table allocation the JIT sinks (JIT on)
--   coro   two coroutines that pass numbers back and forth
--   hook   loop under a count hook (every 997 instructions; interpreted):
--          the hook runs as often attached as not
local kind, rounds = arg[1], tonumber(arg[2]) or 5

local function loop(n)
  local s = 0
  for i = 1, n do s = (s * 31 + i) % 1000003 end
  return s
end

local function sunk(n)
  local s = 0
  for i = 1, n do
    local p = { x = i, y = s }  -- sunk: no allocation in the trace
    s = (p.y * 31 + p.x) % 1000003
  end
  return s
end

local function coro(n)
  local co = coroutine.wrap(function(v)
    while true do v = coroutine.yield((v * 31 + 7) % 1000003) end
  end)
  local s = 1
  for _ = 1, n do s = co(s) end
  return s
end

local hooks = 0
local function hooked(n)
  debug.sethook(function() hooks = hooks + 1 end, "", 997)
  local s = loop(n)
  debug.sethook()
  return s .. " hooks " .. hooks
end

local body = ({ loop = { loop, 2e8 }, sunk = { sunk, 2e8 }, coro = { coro, 5e7 },
                hook = { hooked, 1e8 } })[kind]
if not body then
  io.stderr:write("busy.lua: unknown kind ", tostring(kind), "\n")
  os.exit(2)
end

local function rec(d)
  if d == 0 then return body[1](body[2]) end
  return (rec(d - 1))
end

io.stdout:setvbuf("line")
print("ready")
for r = 1, rounds do print("round " .. r .. " " .. rec(8)) end
