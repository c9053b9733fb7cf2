-- require("jit.perf") whatever loaders the host installs: the patched VM's
-- require answers it when every loader has missed it, so a host that
-- replaces package.loaders (Tarantool 3 does) still gets it, and a loader
-- that finds a "jit.perf" of its own still wins. Prints one line a case.
local function is_perf(m)
  return type(m) == "table" and type(m.start) == "function"
    and type(m.stop) == "function" and type(m.status) == "function"
end

-- The host's own searchers, put in place of the standard ones (in place,
-- as Tarantool does with rawset): they know one module.
local loaders = package.loaders
for i = #loaders, 1, -1 do loaders[i] = nil end
loaders[1] = function(name)
  if name == "host.mod" then return function() return "host module" end end
  return "\n\tno host module '" .. name .. "'"
end
print("host searchers", require("host.mod"), is_perf(require("jit.perf")))
local ok, err = pcall(require, "no.such.module")
print("host miss", ok, (tostring(err):gsub("\n", " ")))
print("status", require("jit.perf").status().map)

-- No loader at all.
package.loaded["jit.perf"] = nil
for i = #loaders, 1, -1 do loaders[i] = nil end
print("no searchers", is_perf(require("jit.perf")))

-- A searcher that has a jit.perf of its own comes first.
package.loaded["jit.perf"] = nil
loaders[1] = function(name)
  if name == "jit.perf" then return function(n) return "own " .. n end end
end
print("own searcher", require("jit.perf"))
