-- A module whose functions never capture its table (late_names.lua
-- requires it), and a function stored by a table constructor: once the main
-- chunk is collected nothing in the heap says "P" or "add" (package.loaded
-- names the table late_mod2); the file still does, also for a function
-- whose bytecode the JIT has patched since.
local P = {}

function P.run(n)                       -- P is not an upvalue of anything
  return n * 5
end

function P.sum(n)                       -- its loop is compiled: JFORL, as run
  local s = 0
  for i = 1, n do s = s + i end
  return s
end

local handlers = {
  add = function(a, b) return a + b end,        -- named by its key
}

P.handlers = handlers
return P
