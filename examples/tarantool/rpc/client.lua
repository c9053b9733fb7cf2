#!/usr/bin/env tarantool
-- ljperf RPC demo, client side: FIBERS fibers call the server's
-- ljperf_rpc_handle over one net.box connection for SECONDS, check every
-- answer, then end the server (ljperf_rpc_stop) and print a summary.
--   tarantool client.lua HOST:PORT [SECONDS] [FIBERS]
-- Exit status 0 when every call succeeded with the right answer.
local fiber = require('fiber')
local net_box = require('net.box')

local uri = arg[1]
local seconds = tonumber(arg[2] or '3')
local nfibers = tonumber(arg[3] or '8')
if uri == nil or seconds == nil or nfibers == nil then
    io.stderr:write('usage: tarantool client.lua HOST:PORT [SECONDS] [FIBERS]\n')
    os.exit(2)
end

-- What the server's handler returns for K (server.lua: store + score).
local function expected(k)
    local acc = k
    for i = 1, 300 do
        acc = (acc * 1103515245 + 12345 + i) % 2147483648
    end
    return k % 40 + acc % 1000
end

-- Connects and waits until the server is ready (30 s at most).
local conn
local t_end = fiber.clock() + 30
local ready = false
repeat
    conn = net_box.connect(uri, {wait_connected = 1})
    ready = conn:is_connected() and pcall(conn.call, conn, 'ljperf_rpc_ready')
    if not ready then
        conn:close()
        fiber.sleep(0.05)
    end
until ready or fiber.clock() > t_end
if not ready then
    io.stderr:write('client.lua: no ready server at ' .. uri .. '\n')
    os.exit(1)
end

local calls, bad = 0, 0
local deadline = fiber.clock() + seconds
local done = fiber.channel(nfibers)
for f = 1, nfibers do
    fiber.create(function()
        local k = f * 100003
        while fiber.clock() < deadline do
            k = k + 1
            local ok, r = pcall(conn.call, conn, 'ljperf_rpc_handle', {k})
            calls = calls + 1
            if not ok or r ~= expected(k) then
                bad = bad + 1
                if bad <= 3 then
                    io.stderr:write(('call %d: %s\n'):format(k, tostring(r)))
                end
            end
        end
        done:put(f)
    end)
end
for _ = 1, nfibers do
    done:get()
end
local ok, audits = pcall(conn.call, conn, 'ljperf_rpc_stop')
print(('ljperf rpc client: %d calls, %d bad, %s audits on the server'):format(
    calls, bad, ok and tostring(audits) or 'no answer: ' .. tostring(audits)))
os.exit((bad == 0 and ok and audits == calls) and 0 or 1)
