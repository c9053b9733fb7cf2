-- A Tarantool instance started without LUAJIT_PERF: `ljperf record --mem
-- -p` samples its allocations (tests/tarantool/mem.py). After box.cfg the
-- main chunk returns and the process sits in Tarantool's event loop. One
-- fiber (fiber_main -> worker -> make_items) builds batches of tables and
-- strings and drops them, yielding after each batch; another counts in a
-- loop without allocating; a third prints the batches/s every 0.1 s
-- ('rate=N'), and BAD if a batch is wrong.
-- arg[1]: seconds to run (default: until killed). TMPDIR: where work_dir is.
local fiber = require('fiber')
local fio = require('fio')
local limit = tonumber(arg[1])
io.stdout:setvbuf('line')

local work_dir = assert(fio.tempdir())
box.cfg{work_dir = work_dir, memtx_memory = 32 * 1024 * 1024, wal_mode = 'none',
        checkpoint_interval = 0, log = fio.pathjoin(work_dir, 'tarantool.log'),
        log_level = 4}

local function make_items(n, k)
    local items = {}
    for i = 1, n do
        items[i] = {id = k + i, name = 'item-' .. (k + i), tags = {'a', 'b'}}
    end
    return items
end

local batches, bad = 0, 0
local function worker()
    local k = 0
    while true do
        local items = make_items(64, k)
        if #items ~= 64 or items[64].name ~= 'item-' .. (k + 64) then
            bad = bad + 1
            print('BAD ' .. k)
        end
        k = k + 64
        batches = batches + 1
        fiber.yield()
    end
end

local function fiber_main()
    worker()
    return true          -- not a tail call: fiber_main keeps its frame
end

local function counter()
    local n = 0
    while true do
        for i = 1, 1000 do n = n + i % 7 end
        fiber.sleep(0.001)
    end
end

fiber.create(fiber_main)
fiber.create(counter)
fiber.create(function()
    local t0, start = fiber.clock(), fiber.clock()
    print('ready')
    while not limit or fiber.clock() - start < limit do
        fiber.sleep(0.1)
        local t = fiber.clock()
        print(string.format('rate=%.0f', batches / (t - t0)))
        batches, t0 = 0, t
    end
    print('done')
    fio.rmtree(work_dir)
    os.exit(bad == 0 and 0 or 1)
end)
