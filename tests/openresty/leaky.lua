-- tests/openresty/mem.py: two content handlers. handle() leaks: every
-- request adds a ~530-byte string to a module-level table that is never
-- emptied. churn() allocates more (small tables and strings) and keeps
-- none of it.
local M = {}
local cache = {}

function M.handle()
  cache[#cache + 1] = string.rep("x", 512) .. ngx.now()
  ngx.print("kept ", #cache, "\n")
end

function M.churn()
  local t = {}
  for i = 1, 16 do
    t[i] = {i, i + 1, "item" .. i}
  end
  ngx.print("churned ", #t, "\n")
end

return M
