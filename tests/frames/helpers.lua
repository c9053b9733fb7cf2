-- Samples in VM helpers (GC steps, table and string allocation) called by
-- the interpreter or by traces: driver -> alloc -> (lj_tab_new, lj_str_new,
-- lj_gc_step, ...).
local function alloc(n)
  local t
  for i = 1, n do t = { i, tostring(i) .. "x", { i } } end
  return t
end
local function driver(rounds) for r = 1, rounds do alloc(20000) end end
driver(tonumber(arg[1]) or 50)
print("done")
