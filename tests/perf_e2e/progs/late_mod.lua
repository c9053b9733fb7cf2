-- A module (late_names.lua requires it): its main chunk runs once and is
-- collected, so a jit.perf.start() after that finds every function here
-- without the parent that named it. Each way of naming a function once.
local M = {}
local Class = {}
Class.__index = Class

local function fib(n)                   -- a local function, recursive
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local square = function(x) return x * x end     -- local f = function

function M.field(n)                     -- a field of the module table
  return n + 1
end

function M.work(n)                      -- captures M, fib and square
  return fib(n) + square(n) + M.field(n)
end

function M:method(n)                    -- a method (self)
  return self.base + fib(n)
end

M.assigned = function(n) return n * 2 end       -- t.k = function

function Class.new(b)
  return setmetatable({ b = b }, Class)
end

function Class:get()
  return self.b
end

function late_global(x)                 -- a global function
  return x * 3
end

function M.make_counter()               -- returns an anonymous closure
  local c = 0
  return function() c = c + 1; return c end
end

M.Class = Class
M.base = 1
return M
