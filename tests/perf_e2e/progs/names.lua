-- Functions defined every way Lua lets a name be known at parse time, and
-- chunks with awkward names. Each function burns CPU in its own loop, so it
-- is the leaf Lua frame of the samples taken in it (interpreter) or the
-- owner of the trace they hit (JIT). vm_under_perf.py knows these line numbers:
-- keep EXPECT_NAMES there in sync when editing.
--   luajit [-joff] names.lua [ITERATIONS]
local ITER = tonumber(arg and arg[1]) or 1000000

local a = { b = {} }
function a.b:c(n)                       -- line 10: a.b:c
  local s = 0
  for i = 1, n do s = (s + i * 3) % 1000003 end
  return s
end

local M = {}
function M.f(n)                         -- line 17: M.f
  local s = 0
  for i = 1, n do s = (s + i * 5) % 1000003 end
  return s
end

local function lf(n)                    -- line 23: lf
  local s = 0
  for i = 1, n do s = (s + i * 7) % 1000003 end
  return s
end

gx = function(n)                        -- line 29: gx (global)
  local s = 0
  for i = 1, n do s = (s + i * 11) % 1000003 end
  return s
end

local t = { g = function(n)             -- line 35: g (table constructor)
  local s = 0
  for i = 1, n do s = (s + i * 13) % 1000003 end
  return s
end }

local anon = { (function() return function(n)   -- line 41: anonymous
  local s = 0
  for i = 1, n do s = (s + i * 17) % 1000003 end
  return s
end end)() }

-- Chunks with awkward names, each defining "function hot(n)" on its line 2.
local body = "\nfunction hot(n)\n  local s = 0\n" ..
             "  for i = 1, n do s = (s + i * %d) %% 1000003 end\n  return s\nend\n"
local chunks = {
  { src = body:format(19) },                             -- source as name
  { src = body:format(23), name = "=my chunk (v2); part:3" },
  { src = body:format(29), name = "@dir with space/file(1).lua" },
  { src = body:format(31), name = "=donn\195\169es/\207\128.lua" },  -- données/π.lua
  { src = body:format(37), name = "=" .. string.rep("long", 200) },
  { src = body:format(41), name = "=(load)" },
}
local hots = {}
for i, c in ipairs(chunks) do
  local f = assert(loadstring(c.src, c.name))
  f()
  hots[i] = hot
end

local function run(n)                   -- line 65: run
  local r = 0
  r = r + a.b:c(n)                      -- line 67
  r = r + M.f(n)                        -- line 68
  r = r + lf(n)                         -- line 69
  r = r + gx(n)                         -- line 70
  r = r + t.g(n)                        -- line 71
  r = r + anon[1](n)                    -- line 72
  for i = 1, #hots do r = r + hots[i](n) end  -- line 73
  return r
end

print("result", run(ITER))
