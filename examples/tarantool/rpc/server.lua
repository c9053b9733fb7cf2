#!/usr/bin/env tarantool
-- ljperf RPC demo, server side: a Lua handler that net.box clients call
-- over IPROTO. Started by Tarantool 3's config (`tarantool --name server
-- --config config.yaml`, this file is its app.file) or, on Tarantool 2.x,
-- as a script (`tarantool server.lua`; LJPERF_RPC_LISTEN gives the port).
--
-- What a profile of it shows: an IPROTO request fiber (tx_process_call ->
-- box_process_call -> box_lua_call) -> ljperf_rpc_handle -> ljperf_rpc_route
-- (recursion) -> ljperf_rpc_store -> space:replace (box C API -> memtx) ->
-- the on_replace trigger ljperf_rpc_audit (the trigger module on 3.x), and
-- ljperf_rpc_score, pure Lua. Meanwhile IDLE_FIBERS fibers tick in the
-- background (a fiber-heavy instance, where box.cfg runs again).
--
-- The client (client.lua) ends the server by calling ljperf_rpc_stop.
local fiber = require('fiber')

local IDLE_FIBERS = 200
local idle = 0

local function ljperf_rpc_idle()
    while true do
        fiber.sleep(0.01)
    end
end

local function start_idle(n)
    for _ = 1, n do
        fiber.create(ljperf_rpc_idle)
    end
    idle = idle + n
end

if type(box.cfg) == 'function' then
    -- Not started by a config: Tarantool 2.x, or 3.x run as a script.
    local listen = os.getenv('LJPERF_RPC_LISTEN')
    if listen == nil then
        io.stderr:write('server.lua: set LJPERF_RPC_LISTEN (host:port) or start it with '
                        .. '`tarantool --name server --config config.yaml`\n')
        os.exit(2)
    end
    start_idle(IDLE_FIBERS / 2)     -- box.cfg runs among fibers
    box.cfg{memtx_memory = 64 * 1024 * 1024, wal_mode = 'none',
            checkpoint_interval = 0, log_level = 4,
            log = os.getenv('LJPERF_RPC_LOG') or 'tarantool.log'}
    box.schema.user.grant('guest', 'super', nil, nil, {if_not_exists = true})
    box.cfg{listen = listen}        -- clients come once guest may call
end

local space = box.schema.space.create('ljperf_rpc', {if_not_exists = true})
space:create_index('pk', {parts = {1, 'unsigned'}, if_not_exists = true})

local audits = 0
local function ljperf_rpc_audit(old, new)
    audits = audits + 1
    if new ~= nil and new[2] < 0 then
        error('negative key')
    end
end

local ok_trigger, trigger = pcall(require, 'trigger')
if ok_trigger then
    -- Tarantool 3: the trigger module, by event name.
    trigger.set('box.space.ljperf_rpc.on_replace', 'ljperf_rpc_audit', ljperf_rpc_audit)
else
    space:on_replace(ljperf_rpc_audit)
end

local function ljperf_rpc_score(k)
    local acc = k
    for i = 1, 300 do
        acc = (acc * 1103515245 + 12345 + i) % 2147483648
    end
    return acc
end

local function ljperf_rpc_store(k)
    local t = space:replace{k % 512, k, string.rep('v', k % 40)}
    return #t[3]
end

local function ljperf_rpc_route(depth, k)
    if depth == 0 then
        return ljperf_rpc_store(k) + ljperf_rpc_score(k) % 1000
    end
    return ljperf_rpc_route(depth - 1, k) + 0   -- not a tail call: a frame per level
end

local function ljperf_rpc_handle(k)
    return ljperf_rpc_route(4, k) + 0       -- not a tail call either
end

local function ljperf_rpc_stop()
    fiber.create(function()
        fiber.sleep(0.2)
        os.exit(0)
    end)
    return audits
end

-- net.box calls global functions by name; clients wait for ljperf_rpc_ready
-- (on 3.x the port listens before the config grants guest its role).
rawset(_G, 'ljperf_rpc_handle', ljperf_rpc_handle)
rawset(_G, 'ljperf_rpc_stop', ljperf_rpc_stop)
rawset(_G, 'ljperf_rpc_ready', function() return true end)

start_idle(IDLE_FIBERS - idle)
-- A reconfiguration among the fibers (on 3.x the config ran box.cfg before
-- this file): a bigger input buffer for the clients' requests.
box.cfg{readahead = 64 * 1024}
print('ljperf rpc server: ready')
