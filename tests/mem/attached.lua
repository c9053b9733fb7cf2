-- A program started without LUAJIT_PERF: allocates from `grow` forever and
-- prints, each second, whether allocation samples are on (jit.perf's status),
-- until its stdin closes.
local perf = require("jit.perf")
local ffi = require("ffi")
ffi.cdef("int poll(void *fds, unsigned long n, int timeout);")
local fds = ffi.new("struct { int fd; short events, revents; }[1]")
fds[0].fd, fds[0].events = 0, 1
local slots = {}
local function grow(n)
  for i = 1, n do slots[i % 256 + 1] = {i, tostring(i)} end
end
local last = os.time()
while true do
  grow(20000)
  if os.time() ~= last then
    last = os.time()
    io.write(perf.status().mem and "mem on\n" or "mem off\n")
    io.flush()
    if ffi.C.poll(fds, 1, 0) > 0 then break end   -- stdin closed or readable
  end
end
