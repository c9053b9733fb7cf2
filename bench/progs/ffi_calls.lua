-- FFI: calls to libc functions and cdata arithmetic / arrays.
local ffi = require("ffi")
pcall(ffi.cdef, [[
int abs(int);
size_t strlen(const char *);
]])
local N = tonumber(arg and arg[1]) or 3000000
local buf = ffi.new("int32_t[256]")
local acc = 0
local s = "hello ffi world"
for i = 1, N do
  local k = i % 256
  buf[k] = buf[k] + ffi.C.abs(k - 128)
  if i % 16 == 0 then acc = acc + tonumber(ffi.C.strlen(s)) end
end
for k = 0, 255 do acc = (acc + buf[k]) % 1000000007 end
print(("checksum %d"):format(acc))
