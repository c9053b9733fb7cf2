#!/usr/bin/env tarantool
-- ljperf demo application for Tarantool 2.6 (GC64 LuaJIT).
--
-- Runs on its own temporary work_dir (removed at the end), exits by itself.
-- Function names are distinctive (ljperf_*) so profiles can be checked.
--
-- Environment:
--   LJPERF_APP_MODE     demo (default): box workers + codec worker + hot Lua
--                       loop: only the replace/select loop (benchmark)
--   LJPERF_APP_SECONDS  run time in seconds (default 4 for demo, 2 for loop)
--   LJPERF_APP_JIT      "off" turns the JIT compiler off

local fiber = require('fiber')
local fio = require('fio')
local json = require('json')
local msgpack = require('msgpack')

local MODE = os.getenv('LJPERF_APP_MODE') or 'demo'
if MODE ~= 'demo' and MODE ~= 'loop' then
    io.stderr:write("LJPERF_APP_MODE must be 'demo' or 'loop', not '", MODE, "'\n")
    os.exit(2)
end
local SECONDS = tonumber(os.getenv('LJPERF_APP_SECONDS') or '') or
                (MODE == 'loop' and 2 or 4)
if os.getenv('LJPERF_APP_JIT') == 'off' then
    jit.off()
end

local BOX_WORKERS = MODE == 'loop' and 1 or 3
local KEYS = 2000        -- primary keys per worker
local GROUPS = 50        -- distinct values of the secondary key
local BATCH = 200        -- box operations between clock readings / yields

-- Per-category CPU seconds (os.clock deltas) and counters.
local stats = {
    box_cpu = 0, hot_cpu = 0, codec_cpu = 0,
    replaces = 0, selects = 0, updates = 0,
    triggers = 0, codec_rounds = 0, hot_calls = 0, hot_result = 0,
}

---------------------------------------------------------------------------
-- Pure-Lua hot path: ljperf_hot_outer -> ljperf_hot_mid -> ljperf_hot_inner
---------------------------------------------------------------------------
local function ljperf_hot_inner(seed, n)
    local acc = seed
    for i = 1, n do
        acc = (acc * 1103515245 + 12345 + i) % 2147483648
    end
    return acc
end

local function ljperf_hot_mid(seed, rounds)
    local acc = 0
    for r = 1, rounds do
        acc = (acc + ljperf_hot_inner(seed + r, 64)) % 2147483648
    end
    return acc
end

-- Recursion gives a deeper, still named, Lua stack.
local function ljperf_hot_outer(seed, depth)
    if depth > 0 then
        return ljperf_hot_outer(seed + 1, depth - 1) % 65536 + 1
    end
    return ljperf_hot_mid(seed, 400)
end

---------------------------------------------------------------------------
-- Box workload
---------------------------------------------------------------------------
-- on_replace trigger: Lua called from C inside every replace/update.
local function ljperf_on_replace(old, new)
    stats.triggers = stats.triggers + 1
    if new ~= nil and new[3] < 0 then
        error('negative counter')
    end
end

-- One batch of replace/select/update calls; returns the replace+select count.
local function ljperf_box_batch(space, base, iter)
    local pk, by_group = space.index.pk, space.index.by_group
    local rs = 0
    for i = 1, BATCH / 4 do
        local id = base + (iter * 7 + i * 13) % KEYS
        space:replace({id, id % GROUPS, iter, 'payload-' .. (id % 97)})
        local t = pk:select({id})
        if #t ~= 1 then
            error('select by primary key lost tuple ' .. id)
        end
        by_group:select({id % GROUPS}, {limit = 4})
        space:update({id}, {{'+', 3, 1}})
        rs = rs + 3
    end
    stats.replaces = stats.replaces + BATCH / 4
    stats.selects = stats.selects + BATCH / 2
    stats.updates = stats.updates + BATCH / 4
    return rs
end

local function ljperf_box_worker(space, wid, deadline, hot, done)
    local base = wid * KEYS
    local iter = 0
    while fiber.clock() < deadline do
        iter = iter + 1
        local t0 = os.clock()
        ljperf_box_batch(space, base, iter)
        local t1 = os.clock()
        stats.box_cpu = stats.box_cpu + (t1 - t0)
        if hot then
            stats.hot_result = (stats.hot_result + ljperf_hot_outer(iter, 8)) % 65536
            stats.hot_calls = stats.hot_calls + 1
            stats.hot_cpu = stats.hot_cpu + (os.clock() - t1)
        end
        fiber.yield()
    end
    done:put(wid)
end

---------------------------------------------------------------------------
-- json / msgpack round trips
---------------------------------------------------------------------------
local function ljperf_codec_round(space, id)
    local t = space.index.pk:get({id})
    local doc = {id = id, tuple = t and t:totable() or {}, tags = {'a', 'b', 'c'},
                 nested = {x = id * 0.5, ok = true}}
    local j = json.decode(json.encode(doc))
    local m = msgpack.decode(msgpack.encode(doc))
    if j.id ~= id or m.id ~= id then
        error('codec round trip changed the document')
    end
    return #j.tags + #m.tags
end

local function ljperf_codec_worker(space, deadline, done)
    local n = 0
    while fiber.clock() < deadline do
        local t0 = os.clock()
        for i = 1, 50 do
            n = n + 1
            ljperf_codec_round(space, KEYS + (n * 31) % KEYS)
        end
        stats.codec_cpu = stats.codec_cpu + (os.clock() - t0)
        stats.codec_rounds = stats.codec_rounds + 50
        fiber.yield()
    end
    done:put('codec')
end

---------------------------------------------------------------------------
-- Main
---------------------------------------------------------------------------
local function ljperf_main(work_dir)
    box.cfg{
        work_dir = work_dir,
        memtx_memory = 64 * 1024 * 1024,
        wal_mode = 'none',
        checkpoint_interval = 0,
        log = fio.pathjoin(work_dir, 'tarantool.log'),
        log_level = 4,
    }
    local space = box.schema.space.create('ljperf_kv', {engine = 'memtx'})
    space:create_index('pk', {type = 'TREE', parts = {1, 'unsigned'}})
    space:create_index('by_group', {type = 'TREE', unique = false,
                                    parts = {2, 'unsigned', 1, 'unsigned'}})
    space:on_replace(ljperf_on_replace)

    local done = fiber.channel(BOX_WORKERS + 1)
    local wall0, cpu0 = fiber.clock(), os.clock()
    local deadline = wall0 + SECONDS
    local nfibers = 0
    for w = 1, BOX_WORKERS do
        fiber.create(ljperf_box_worker, space, w, deadline, MODE == 'demo', done)
        nfibers = nfibers + 1
    end
    if MODE == 'demo' then
        fiber.create(ljperf_codec_worker, space, deadline, done)
        nfibers = nfibers + 1
    end
    for _ = 1, nfibers do
        done:get()
    end
    local wall, cpu = fiber.clock() - wall0, os.clock() - cpu0

    -- replace + select operations per second of CPU time spent in box calls.
    local rs_ops = stats.replaces + stats.selects
    local rate = stats.box_cpu > 0 and rs_ops / stats.box_cpu or 0
    if MODE == 'loop' then
        print(string.format('ljperf-loop: %.1f ops/s (%d replace+select ops, '
                            .. '%.3f s cpu, %.3f s wall, jit %s)',
                            rate, rs_ops, stats.box_cpu, wall,
                            jit.status() and 'on' or 'off'))
        return
    end
    local measured = stats.box_cpu + stats.hot_cpu + stats.codec_cpu
    local function pct(x) return measured > 0 and 100 * x / measured or 0 end
    print(string.format('ljperf demo: %.2f s wall, %.2f s cpu, %d box fibers + 1 codec fiber, jit %s',
                        wall, cpu, BOX_WORKERS, jit.status() and 'on' or 'off'))
    print(string.format('  box: %d replace, %d select, %d update; on_replace fired %d times',
                        stats.replaces, stats.selects, stats.updates, stats.triggers))
    print(string.format('  replace/select loop rate: %.1f ops/s (per cpu second in box calls)', rate))
    print(string.format('  codec: %d json+msgpack round trips', stats.codec_rounds))
    print(string.format('  hot Lua: %d calls of ljperf_hot_outer (result %d)',
                        stats.hot_calls, stats.hot_result))
    print(string.format('  cpu share: hot Lua %.1f%%, box calls %.1f%%, codec %.1f%% '
                        .. '(of %.2f s measured by os.clock)',
                        pct(stats.hot_cpu), pct(stats.box_cpu), pct(stats.codec_cpu), measured))
end

-- fio.tempdir() makes a unique directory under $TMPDIR (default /tmp).
local work_dir, err = fio.tempdir()
if work_dir == nil then
    io.stderr:write('ljperf demo: cannot create a work_dir: ', tostring(err), '\n')
    os.exit(1)
end
local ok, main_err = pcall(ljperf_main, work_dir)
io.stdout:flush()
fio.rmtree(work_dir)
if not ok then
    io.stderr:write('ljperf demo failed: ', tostring(main_err), '\n')
    os.exit(1)
end
os.exit(0)
