-- Allocates known byte counts of known object kinds, one phase per kind,
-- and prints the truth: each phase's bytes, measured by the VM's own count
-- (collectgarbage "count", the GC stopped around the phase). Each phase
-- allocates one kind but for a small part (a table.new table's header is a
-- table, its array or hash part the kind measured). Every object is kept
-- in a slot of a preallocated table, so that the JIT sinks none. Samples
-- are switched off while the program sets up (jit.perf).
-- usage: luajit kinds.lua
local ffi = require("ffi")
local perf = require("jit.perf")
local tnew = require("table.new")
local mem = perf.status().mem
if mem then perf.stop("mem") end

local slots = {}
for i = 1, 64 do slots[i] = false end
-- The string table, grown once for good (its resize would count as other).
local pinned = {}
for i = 1, 140000 do pinned[i] = "pinned" .. i end
local prefix = ("p"):rep(300)
local function noop() end

local phases = {
  {"string", 60000, function(i) return prefix .. i end},
  {"table", 250000, function() return {} end},
  {"table array", 2000, function() return tnew(1000, 0) end},
  {"table hash", 800, function() return tnew(0, 1000) end},
  {"closure", 400000, function() return function() return 1 end end},
  {"cdata", 16000, function() return ffi.new("char[?]", 1000) end},
  {"userdata", 300000, function() return newproxy() end},
  {"thread", 16000, function() return coroutine.create(noop) end},
}
-- Everything the phases call, once, before samples start.
for _, p in ipairs(phases) do for i = 1, 100 do slots[i % 64 + 1] = p[3](i) end end
collectgarbage()
if mem then perf.start("mem") end
local truth = {}
for _, p in ipairs(phases) do
  local name, n, f = p[1], p[2], p[3]
  collectgarbage()
  collectgarbage("stop")
  local before = collectgarbage("count")
  for i = 1, n do slots[i % 64 + 1] = f(i) end
  truth[#truth + 1] = string.format("%s\t%d", name, (collectgarbage("count") - before) * 1024)
  collectgarbage("restart")
end
io.write(table.concat(truth, "\n"), "\n")
