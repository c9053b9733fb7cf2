-- A ping-pong over two pipes with a forked child: ROUNDS (arg 1) round
-- trips, each followed by WORK (arg 2) inner iterations of computation,
-- which sets the rate (bench/offcpu.py paces it near 10,000 switches/s).
-- Prints `elapsed SECONDS` (CLOCK_MONOTONIC, the loop only) and `checksum N`.
local ffi = require("ffi")
ffi.cdef[[
struct timespec { long tv_sec; long tv_nsec; };
int clock_gettime(int clk, struct timespec *ts);
int pipe(int fds[2]);
int fork(void);
long read(int fd, void *buf, unsigned long n);
long write(int fd, const void *buf, unsigned long n);
int close(int fd);
int waitpid(int pid, int *status, int options);
void _exit(int status);
]]
local C = ffi.C
local rounds = tonumber(arg[1]) or 20000
local work = tonumber(arg[2]) or 2000
local ping, pong = ffi.new("int[2]"), ffi.new("int[2]")
assert(C.pipe(ping) == 0 and C.pipe(pong) == 0)
local buf = ffi.new("char[1]")
local pid = C.fork()
if pid == 0 then                      -- the child: echo every byte back
  C.close(ping[1]); C.close(pong[0])
  while C.read(ping[0], buf, 1) == 1 do C.write(pong[1], buf, 1) end
  C._exit(0)
end
C.close(ping[0]); C.close(pong[1])   -- the child's ends: its exit ends the pipes
local ts = ffi.new("struct timespec")
local function now()
  C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
local function compute(n, x)
  for i = 1, n do x = (x * 31 + i) % 1000003 end
  return x
end
local function roundtrip()
  assert(C.write(ping[1], buf, 1) == 1 and C.read(pong[0], buf, 1) == 1)
end
local x = 0
local t0 = now()
for _ = 1, rounds do
  roundtrip()
  x = compute(work, x)
end
local elapsed = now() - t0
C.close(ping[1])
C.waitpid(pid, nil, 0)
io.write(string.format("elapsed %.6f\nchecksum %d\n", elapsed, x))
