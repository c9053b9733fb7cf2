-- pollhost's handler: blocks 20 ms through the FFI
local ffi = require("ffi")
ffi.cdef[[int usleep(unsigned int usec);]]
local function handle()
  ffi.C.usleep(20000)
end
return function() handle() end
