-- Shared helpers for the torture programs (loaded with dofile, cwd = tests/torture).
-- Everything printed must be deterministic: no addresses, no timing, no
-- iteration over object-keyed tables.
local T = {}
local write, fmt, concat = io.write, string.format, table.concat
local nchecks = 0

-- Render a value deterministically (never prints an address).
local function show(v, depth)
  local tv = type(v)
  if tv == "string" then
    return (v:gsub("0x%x+", "0x?"))
  elseif tv == "number" then
    if v ~= v then return "nan" end
    if v == math.floor(v) and math.abs(v) < 2^53 then return fmt("%d", v) end
    return fmt("%.9g", v)
  elseif tv == "boolean" or tv == "nil" then
    return tostring(v)
  elseif tv == "table" then
    depth = depth or 0
    if depth > 3 then return "{...}" end
    local keys = {}
    for k in pairs(v) do
      local tk = type(k)
      if tk ~= "string" and tk ~= "number" and tk ~= "boolean" then
        keys[#keys+1] = "<" .. tk .. ">"  -- object key: only its type
      else
        keys[#keys+1] = k
      end
    end
    table.sort(keys, function(a, b)
      local ta, tb = type(a), type(b)
      if ta ~= tb then return ta < tb end
      if ta == "boolean" then return (a and 1 or 0) < (b and 1 or 0) end
      return a < b
    end)
    local parts = {}
    for i = 1, #keys do
      local k = keys[i]
      if type(k) == "string" and k:sub(1, 1) == "<" then
        parts[#parts+1] = k .. "=?"
      else
        parts[#parts+1] = show(k, depth+1) .. "=" .. show(v[k], depth+1)
      end
    end
    return "{" .. concat(parts, ",") .. "}"
  else
    return "<" .. tv .. ">"  -- function, thread, userdata, cdata
  end
end
T.show = show

function T.log(...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do parts[i] = show((select(i, ...))) end
  write(concat(parts, "\t"), "\n")
end

function T.section(name) write("== ", name, "\n") end

-- Assertion that reports where it failed (level 2 = caller).
function T.check(cond, msg)
  nchecks = nchecks + 1
  if not cond then error("CHECK FAILED: " .. tostring(msg), 2) end
  return cond
end

function T.eq(got, want, msg)
  nchecks = nchecks + 1
  if got ~= want then
    error(fmt("CHECK FAILED: %s: got %s, want %s", tostring(msg),
              show(got), show(want)), 2)
  end
end

-- Strip the directory part of positions so messages do not depend on how the
-- program was invoked, then remove addresses.
function T.msg(e)
  if type(e) == "string" then return (e:gsub("0x%x+", "0x?")) end
  return show(e)
end

-- Stack overflow messages carry a position when the overflow is detected in
-- compiled code and none when the interpreter detects it at function entry;
-- which one happens depends on trace compilation, so only the kind is kept.
function T.sov(e)
  e = T.msg(e)
  if e:find("stack overflow", 1, true) then return "<stack overflow>" end
  return e
end

-- Deterministic traceback text: addresses masked.
function T.tb(msg, level)
  return (debug.traceback(msg, (level or 1) + 1):gsub("0x%x+", "0x?"))
end

-- Simple exact 32-bit polynomial checksum (all arithmetic exact in doubles).
function T.hash(h, s)
  s = tostring(s)
  h = h or 7
  for i = 1, #s do h = (h * 31 + s:byte(i)) % 4294967296 end
  return h
end

function T.done(name)
  write(fmt("DONE %s checks=%d\n", name, nchecks))
end

-- True when the program runs with the JIT compiler enabled.
function T.jit_on() return (jit.status()) end

return T
