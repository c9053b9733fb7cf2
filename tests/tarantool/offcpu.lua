-- Off-CPU profile of Tarantool (tests/tarantool/offcpu.py): after box.cfg
-- the main chunk returns into Tarantool's event loop. A fiber runs
-- fiber_main -> blocker, which blocks the tx thread in ffi.C.usleep (10 ms)
-- and then sleeps 30 ms in fiber.sleep (the tx thread idles in its event
-- loop), SECONDS (arg[1]) long; it times its usleep calls itself and prints
-- `blocked SECONDS` and `total SECONDS` before exiting.
local fiber = require('fiber')
local fio = require('fio')
local clock = require('clock')
local ffi = require('ffi')
ffi.cdef[[int usleep(unsigned int usec);]]
local limit = tonumber(arg[1]) or 3
io.stdout:setvbuf('line')

local work_dir = assert(fio.tempdir())
box.cfg{work_dir = work_dir, memtx_memory = 32 * 1024 * 1024, wal_mode = 'none',
        checkpoint_interval = 0, log = fio.pathjoin(work_dir, 'tarantool.log'),
        log_level = 4}

local blocked = 0
local function blocker()
    local t = clock.monotonic()
    ffi.C.usleep(10000)
    blocked = blocked + clock.monotonic() - t
end

local function fiber_main()
    local start = clock.monotonic()
    while clock.monotonic() - start < limit do
        blocker()
        fiber.sleep(0.03)
    end
    print(string.format('blocked %.6f', blocked))
    print(string.format('total %.6f', clock.monotonic() - start))
    fio.rmtree(work_dir)
    os.exit(0)
end

fiber.create(fiber_main)
