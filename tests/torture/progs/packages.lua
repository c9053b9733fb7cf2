-- What the standard library set-up leaves in package.preload and
-- package.loaded, and how require searches: the patched VM registers nothing
-- of its own there (require answers jit.perf itself, only when asked for
-- and every loader missed it), so both VMs list the same modules and say
-- the same on a miss.
local T = dofile("progs/_tlib.lua")
local log, check = T.log, T.check

local function keys(t)
  local k = {}
  for name, v in pairs(t) do k[#k + 1] = tostring(name) .. ":" .. type(v) end
  table.sort(k)
  return table.concat(k, " ")
end

T.section("modules present after start-up")
log("preload", keys(package.preload))
log("loaded", keys(package.loaded))

T.section("a miss names every place searched")
do
  local ok, err = pcall(require, "no.such.module")
  check(not ok, "require of a missing module fails")
  local e = tostring(err):gsub("\n\t[^\n]*no file[^\n]*", "")  -- paths differ
  log("error", e)
end

T.section("a preload entry of the program's own comes first")
do
  package.preload["jit.perf"] = function(name) return "own " .. name end
  log("jit.perf", require("jit.perf"))
  package.loaded["jit.perf"], package.preload["jit.perf"] = nil, nil
  package.preload["mine"] = function(name) return { name = name } end
  log("mine", require("mine").name)
end
T.done("packages")
