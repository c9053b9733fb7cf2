-- tests/openresty/mem.py: two content handlers. handle() leaks: every
-- request puts a ~530-byte string at the head of a module-level list that
-- is never emptied (a list, not an array: an array's occasional doubling
-- is one block of megabytes, which would weigh more than the test's
-- thousands of requests). churn() allocates more (small tables and
-- strings) and keeps none of it.
local M = {}
local cache, kept = nil, 0

function M.handle()
  cache = {string.rep("x", 512) .. ngx.now(), cache}
  kept = kept + 1
  ngx.print("kept ", kept, "\n")
end

function M.churn()
  local t = {}
  for i = 1, 16 do
    t[i] = {i, i + 1, "item" .. i}
  end
  ngx.print("churned ", #t, "\n")
end

return M
