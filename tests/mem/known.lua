-- Allocates known byte counts from three functions (strings, tables,
-- closures) and prints the truth: each function's bytes, measured by the
-- VM's own count (collectgarbage "count", the GC stopped around each run).
-- Every object is kept in a slot of a preallocated table, so that neither
-- the JIT's allocation sinking nor a table resize changes what is counted.
-- usage: luajit known.lua [ROUNDS]
local ROUNDS = tonumber(arg and arg[1]) or 40
local CHUNK = 20000

local slots = {}
for i = 1, 64 do slots[i] = false end
-- The string table, grown once for good: 70 000 strings kept, so the
-- 20 000 a run of strs adds never resize it (a resize reallocates it, which
-- samples count in full and the VM's own count only by the difference).
local pinned = {}
for i = 1, 70000 do pinned[i] = "pinned" .. i end

local function strs(n)
  for i = 1, n do slots[i % 64 + 1] = "s" .. i .. "-abcdefghijklmnopqrstuvwxyz0123456789" end
end

local function tabs(n)
  for i = 1, n do slots[i % 64 + 1] = {i, i, i, i, i, i} end
end

local function clos(n)
  for i = 1, n do
    local a, b = i, -i
    slots[i % 64 + 1] = function() return a + b end
  end
end

local work = {strs = strs, tabs = tabs, clos = clos}
local order = {"strs", "tabs", "clos", "tabs"}   -- tabs twice: not equal shares
local truth = {strs = 0, tabs = 0, clos = 0}
for _ = 1, ROUNDS do
  for _, name in ipairs(order) do
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    work[name](CHUNK)
    truth[name] = truth[name] + (collectgarbage("count") - before) * 1024
    collectgarbage("restart")
  end
end
for _, name in ipairs({"strs", "tabs", "clos"}) do
  io.write(string.format("%s %d\n", name, truth[name]))
end
