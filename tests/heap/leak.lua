-- heap.leak: a module whose handler keeps every request in an upvalue;
-- base after a warm-up, target after LEAKED more requests, final after as
-- many again. Requests made between base and target stay alive in final.
local perf = require("jit.perf")
local dir = assert(arg[1], "usage: leak.lua DIR")
package.loaded.hs_leaky = (function()
  local M = { Request = {} }
  M.Request.__index = M.Request
  local seen_requests = {}
  function M.handle(id)
    local req = setmetatable({ id = id, body = ("r"):rep(64) .. id }, M.Request)
    local garbage = { scratch = ("garbage"):rep(4) .. id }   -- freed
    seen_requests[#seen_requests + 1] = req
    return #garbage.scratch
  end
  return M
end)()
local leaky = require("hs_leaky")
local LEAKED = 300
local id = 0
local function serve(n)
  for _ = 1, n do id = id + 1; leaky.handle(id) end
  collectgarbage(); collectgarbage()
end
local function snap(name)
  assert(perf.heapsnapshot(dir .. "/" .. name .. ".heapsnapshot"))
end
serve(100); snap("base")
serve(LEAKED); snap("target")
serve(LEAKED); snap("final")
print("leaked", LEAKED)
