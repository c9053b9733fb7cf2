-- lj_merge fixture workload (tests/lj_merge/capture/capture-real.sh): FFI.
-- Line numbers are part of the expected stacks: keep them.
local ffi = require("ffi")
ffi.cdef[[
double ljm_spin(long n);
double ljm_each(long n, double (*cb)(long));
]]
local lib = ffi.load("./libljmffi.so")
local function spin_jit(n)
  local s = 0
  for i = 1, 200 do s = s + lib.ljm_spin(n) end
  return s
end
local function spin_interp(n)
  local r = lib.ljm_spin(n)
  return r
end
jit.off(spin_interp)
local function cb_work(i)
  local s = 0
  for k = 1, 3000 do s = s + k * 0.5 end
  return s
end
jit.off(cb_work)  -- FFI callbacks may not be entered from JIT-compiled code
local cb = ffi.cast("double (*)(long)", cb_work)
local function each(n)
  local r = lib.ljm_each(n, cb)
  return r
end
jit.off(each)
local dur = tonumber(arg and arg[1]) or 0.3
local t0 = os.clock()
while os.clock() - t0 < dur do
  spin_jit(2000)
  spin_interp(400000)
  each(150)
end
cb:free()
