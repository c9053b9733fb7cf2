-- Three functions, timed by the program itself (CLOCK_MONOTONIC): one
-- blocks through the FFI (usleep, poll on a pipe nobody writes), one
-- through the shell (os.execute, io.popen), one computes. ROUNDS rounds
-- (arg 1, default 40) of about 75 ms. Prints `time NAME SECONDS` (wall)
-- and `cpu NAME SECONDS` (this thread's CPU time: the rest is off-CPU) per
-- function and `time total SECONDS` (first call to last return).
local ffi = require("ffi")
ffi.cdef[[
struct timespec { long tv_sec; long tv_nsec; };
int clock_gettime(int clk, struct timespec *ts);
int usleep(unsigned int usec);
struct pollfd { int fd; short events; short revents; };
int poll(struct pollfd *fds, unsigned long nfds, int timeout);
int pipe(int fds[2]);
]]
local C = ffi.C
local ts = ffi.new("struct timespec")
local function clock(id)
  C.clock_gettime(id, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
local function now() return clock(1) end          -- CLOCK_MONOTONIC
local function cputime() return clock(3) end      -- CLOCK_THREAD_CPUTIME_ID

local fds = ffi.new("int[2]")
assert(C.pipe(fds) == 0)
local pfd = ffi.new("struct pollfd[1]")
pfd[0].fd, pfd[0].events = fds[0], 1     -- POLLIN: never comes

local function ffi_wait()
  C.usleep(12000)
  C.poll(pfd, 1, 13)
end

local n = 0
local function shell_wait()
  n = n + 1
  if n % 2 == 0 then
    os.execute("sleep 0.025")
  else
    local f = io.popen("sleep 0.025; echo x")
    f:read("*a")
    f:close()
  end
end

local sink = 0
local function compute()
  local t = now()
  local x = 0
  repeat
    for i = 1, 20000 do x = (x + i * 7) % 1000003 end
  until now() - t >= 0.025
  sink = sink + x
end

local rounds = tonumber(arg and arg[1]) or 40
local spent = { ffi_wait = 0, shell_wait = 0, compute = 0 }
local cpu = { ffi_wait = 0, shell_wait = 0, compute = 0 }
local fns = { ffi_wait = ffi_wait, shell_wait = shell_wait, compute = compute }
local order = { "ffi_wait", "shell_wait", "compute" }
local t0 = now()
for _ = 1, rounds do
  for _, name in ipairs(order) do
    local t, c = now(), cputime()
    fns[name]()
    cpu[name] = cpu[name] + (cputime() - c)
    spent[name] = spent[name] + (now() - t)
  end
end
local total = now() - t0
for _, name in ipairs(order) do
  io.write(string.format("time %s %.6f\ncpu %s %.6f\n", name, spent[name], name, cpu[name]))
end
io.write(string.format("time total %.6f\n", total))
