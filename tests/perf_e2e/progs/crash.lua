-- A program that dies from a signal mid-run: everything described before
-- the signal must be in a valid jitdump (one write per record).
--   luajit [-joff] crash.lua SIGNAL [ITERATIONS]    SIGNAL: SEGV | ABRT
local ffi = require("ffi")
ffi.cdef[[
int getpid(void);
int kill(int pid, int sig);
void abort(void);
]]
local SIG = arg[1] or "SEGV"
local N = tonumber(arg[2]) or 2000000
local function warm(n)
  local s = 0
  for i = 1, n do s = (s + i * 3) % 1000003 end
  return s
end
local r = warm(N)
local last = assert(loadstring([[
local function last_fn(n)
  local s = 0
  for i = 1, n do s = (s + i * 7) % 1000003 end
  return s
end
return last_fn
]], "=last_chunk"))()
r = r + last(N)
print("before crash", ffi.C.getpid(), r)
io.stdout:flush()
if SIG == "ABRT" then ffi.C.abort() else ffi.C.kill(ffi.C.getpid(), 11) end
print("not reached")
