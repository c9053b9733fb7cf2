-- A Tarantool instance started without LUAJIT_PERF and with no profiling
-- code: `ljperf record -p` switches recording on in it and off again
-- (tests/tarantool/remote.py). After box.cfg the main chunk returns and the
-- process sits in Tarantool's event loop; one fiber works: Lua recursion
-- (ljperf_rec, 9 frames deep) down to ljperf_leaf, which calls the box C
-- API (space:replace, a tail call to lbox_replace) and a string op. Another
-- fiber prints jit.perf.status() and the worker's speed every 0.1 s, in
-- tests/remote/prog.lua's format, and BAD if a result is wrong.
-- arg[1]: seconds to run (default: until killed). TMPDIR: where work_dir is.
local fiber = require('fiber')
local fio = require('fio')
local perf = require('jit.perf')
local limit = tonumber(arg[1])
io.stdout:setvbuf('line')

local work_dir = assert(fio.tempdir())
box.cfg{work_dir = work_dir, memtx_memory = 32 * 1024 * 1024, wal_mode = 'none',
        checkpoint_interval = 0, log = fio.pathjoin(work_dir, 'tarantool.log'),
        log_level = 4}
local space = box.schema.space.create('ljperf_remote')
space:create_index('pk', {parts = {1, 'unsigned'}})

local function ljperf_leaf(k)
    local t = space:replace{k % 256, string.rep('x', k % 50)}
    return #t[2]
end

local function ljperf_rec(d, k)
    if d == 0 then
        return ljperf_leaf(k) + 0
    end
    return ljperf_rec(d - 1, k) + 0     -- not a tail call: one frame per level
end

local iters, bad = 0, 0
local function ljperf_worker()
    local k = 0
    while true do
        for _ = 1, 50 do
            k = k + 1
            local v = ljperf_rec(8, k)
            if v ~= k % 50 then
                bad = bad + 1
                print('BAD ' .. k .. ' ' .. v)
            end
            iters = iters + 1
        end
        fiber.yield()
    end
end
-- Interpreted: every level of the recursion keeps its own frame.
jit.off(ljperf_leaf)
jit.off(ljperf_rec)
jit.off(ljperf_worker)

fiber.create(ljperf_worker)
fiber.create(function()
    local t0, start = fiber.clock(), fiber.clock()
    print('ready')
    while not limit or fiber.clock() - start < limit do
        fiber.sleep(0.1)
        local t = fiber.clock()
        local st = perf.status()
        print(string.format('status map=%s jitdump=%s frames=%s remote=%s rate=%.0f',
            tostring(st.map), tostring(st.jitdump), tostring(st.frames),
            tostring(st.remote), iters / (t - t0)))
        iters, t0 = 0, t
    end
    print('done')
    fio.rmtree(work_dir)
    os.exit(bad == 0 and 0 or 1)
end)
