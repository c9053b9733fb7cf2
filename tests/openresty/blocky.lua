-- tests/openresty/offcpu.py: /block makes a blocking FFI call of known
-- length (usleep 2 ms: the worker's event loop stops); /compute and
-- /hash compute and never block.
local ffi = require("ffi")
ffi.cdef[[int usleep(unsigned int usec);]]
local M = {}

function M.block()
    ffi.C.usleep(2000)
    ngx.say("blocked")
end

function M.compute()
    local x = 0
    for i = 1, 20000 do x = (x + i * i) % 1000003 end
    ngx.say("computed ", x)
end

function M.hash()
    local s = ngx.md5(string.rep("ljperf", 200))
    ngx.say("hash ", s)
end

return M
