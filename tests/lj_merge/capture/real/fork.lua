-- lj_merge fixture workload (tests/lj_merge/capture/capture-real.sh): three
-- processes. The parent forks child A, which loads new code after the fork
-- (the VM starts jit-CHILD.dump), and child B, which only runs code loaded
-- before the fork (no dump of its own). Run with -joff.
-- Line numbers are part of the expected stacks: keep them.
local ffi = require("ffi")
ffi.cdef[[
int fork(void);
int waitpid(int pid, int *status, int options);
void _exit(int status);
]]
local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
local dur = tonumber(arg and arg[1]) or 0.3
local function run(f, n)
  local t0 = os.clock()
  while os.clock() - t0 < dur do f(n) end
end
local function parent_work(n) local r = spin(n) return r end
local function child_b(n) local r = spin(n) return r end
local a = ffi.C.fork()
if a == 0 then
  local child_a = load("local spin = ...\n" ..
                       "return function(n) local r = spin(n) return r end",
                       "=child_a")(spin)
  run(child_a, 20000)
  ffi.C._exit(0)
end
local b = ffi.C.fork()
if b == 0 then
  run(child_b, 20000)
  ffi.C._exit(0)
end
run(parent_work, 20000)
ffi.C.waitpid(a, nil, 0)
ffi.C.waitpid(b, nil, 0)
