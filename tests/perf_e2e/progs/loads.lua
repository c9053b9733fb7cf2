-- Load-heavy workload for the fault tests: NCHUNKS generated chunks of
-- NFUNCS functions each, every function called once, plus a hot loop (a
-- trace). Prints a checksum that does not depend on perf support.
--   luajit loads.lua [NCHUNKS] [NFUNCS]
local NCHUNKS = tonumber(arg[1]) or 50
local NFUNCS = tonumber(arg[2]) or 40
local sum = 0
for c = 1, NCHUNKS do
  local parts = { "local M = {}" }
  for f = 1, NFUNCS do
    parts[#parts + 1] = string.format(
      "function M.f%d(x)\n  return (x * %d + %d) %% 65521\nend", f, c, f)
  end
  parts[#parts + 1] = "return M"
  local M = assert(loadstring(table.concat(parts, "\n"), "=gen_" .. c))()
  for f = 1, NFUNCS do sum = (sum + M["f" .. f](c + f)) % 1000000007 end
end
local s = 0
for i = 1, 2000000 do s = (s + i * 7) % 1000003 end
print("checksum", sum, s)
