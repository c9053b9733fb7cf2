-- fork: the child runs code loaded before the fork (it has no jitdump of its
-- own yet), then loads and runs a chunk of its own. Its jit-CHILDPID.dump
-- must describe both, and its samples must resolve.
--   luajit [-joff] fork.lua [ITERATIONS]
local ffi = require("ffi")
ffi.cdef[[
int fork(void);
int getpid(void);
int waitpid(int pid, int *status, int options);
]]
local now = require("clock")
local N = tonumber(arg[1]) or 2000000

local function before_fork(n)           -- line 14
  local s = 0
  for i = 1, n do s = (s + i * 3) % 1000003 end
  return s
end

local child_src = [[
local function child_work(n)
  local s = 0
  for i = 1, n do s = (s + i * 5) % 1000003 end
  return s
end
return child_work
]]

local function with_call(n)             -- a trace that calls C: libm, and the VM (near)
  local s = 0
  for i = 1, n do s = s + math.sin(i) + #("x" .. i) end
  return s
end
with_call(1000)

print("parent", ffi.C.getpid(), before_fork(N))
io.stdout:flush()
local pid = ffi.C.fork()
if pid == 0 then
  local t0 = now()
  local r1 = before_fork(N)
  local t1 = now()
  local child_work = assert(loadstring(child_src, "=child_chunk"))()
  local r2 = child_work(N)
  print(string.format("child %d %.0f %.0f %d %d", ffi.C.getpid(), t0, t1, r1, r2))
  io.stdout:flush()
  os.exit(0)
end
local st = ffi.new("int[1]")
assert(ffi.C.waitpid(pid, st, 0) == pid)
print("parent done", pid, st[0], before_fork(math.floor(N / 4)))
