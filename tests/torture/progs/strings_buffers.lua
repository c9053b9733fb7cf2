-- String building and formatting stress: concatenation chains, table.concat,
-- string.format with many conversions, string.rep, byte/char/sub/find in hot
-- loops, the string.buffer module, interning of many strings.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg
local fmt = string.format

T.section("concatenation")
do
  local s = ""
  for i = 1, 3000 do s = s .. (i % 10) end
  log("chain", #s, T.hash(nil, s))
  local parts = {}
  for i = 1, 20000 do parts[i] = fmt("%05d", i) end
  local big = table.concat(parts, ",")
  log("concat", #big, big:sub(1, 23), big:sub(-11), T.hash(nil, big))
  -- multi-operand concat (BC_CAT with many operands) incl. numbers
  local a, b, c, d, e = "a", 1, 2.5, "d", -3
  local m = a .. b .. c .. d .. e .. a .. b .. c .. d .. e .. a .. b .. c .. d .. e
  log("multi", m)
  log(pcall(function() return a .. {} .. b end))
  log(pcall(function() return a .. nil end))
  log(table.concat({ 1, 2, 3 }, ", ", 2, 3), table.concat({}, "x"), pcall(table.concat, { {} }))
end

T.section("string.format")
do
  local out = {}
  for i = -5, 5 do
    out[#out + 1] = fmt("%d|%5d|%-5d|%05d|%x|%X|%o|%c|%5.2f|%e|%g|%q|%s|%%",
      i * 12345, i, i, i, i * 255 % 4096, i * 4095 % 4096, i * 8 % 512, 65 + i + 5,
      i / 3, i * 1e10, i / 7, "q\n\0\"" .. i, i)
  end
  for i = 1, #out do log(out[i]) end
  log(fmt("%s %s %s", 1, 1.5, "x"), fmt("%10.3s|", "abcdef"), fmt("%-10s|", "ab"))
  log(fmt("%.14g", 0.1), fmt("%.14g", 1 / 3), fmt("%a", 1))
  log(fmt("%5.1f%%", 99.44), fmt("%i", 42))
  log(pcall(fmt, "%d", "x"), pcall(fmt, "%z", 1), pcall(fmt, "%s"))
  log(fmt("%s", setmetatable({}, { __tostring = function() return "TS!" end })))
  -- hot loop building formatted strings
  local h = 0
  for i = 1, 20000 do h = T.hash(h, fmt("%d:%.2f:%s", i, i / 8, i % 2 == 0 and "e" or "o")) end
  log("fmt hash", h)
end

T.section("byte/char/sub/find/upper/lower/reverse")
do
  local s = ("The quick brown fox jumps over the lazy dog"):rep(10)
  local cnt, bsum = 0, 0
  for i = 1, #s do
    local b = s:byte(i)
    bsum = bsum + b
    if s:sub(i, i) == "o" then cnt = cnt + 1 end
  end
  log("bytes", bsum, "o count", cnt)
  local pos, n = 1, 0
  while true do
    local a, b = s:find("the", pos, true)
    if not a then break end
    n = n + 1; pos = b + 1
  end
  log("find plain", n)
  log(s:upper():sub(1, 20), s:lower():sub(1, 20), s:reverse():sub(1, 20))
  log(string.char(72, 105, 0, 33):byte(1, -1))
  log(s:sub(-3), s:sub(5, 2), s:sub(0), ("abc"):sub(-100, 100), ("abc"):byte(10))
  log(pcall(string.char, 256), pcall(string.char, -1))
  local chars = {}
  for i = 0, 255 do chars[#chars + 1] = string.char(i) end
  local all = table.concat(chars)
  log("all bytes", #all, T.hash(nil, all), all:byte(1), all:byte(256))
  log(#("x"):rep(100000), ("ab"):rep(3, "-"), ("ab"):rep(0), ("ab"):rep(1, "-"))
end

T.section("many distinct strings (interning, GC of strings)")
do
  local t = {}
  for i = 1, 50000 do t[i] = "str" .. i end
  local seen = {}
  local dup = 0
  for i = 1, 50000 do
    local k = "str" .. i -- same content, must be the same interned string
    if seen[k] then dup = dup + 1 end
    seen[k] = true
    check(t[i] == k, "interned equal")
  end
  log("distinct", dup)
  t, seen = nil, nil
  collectgarbage()
  -- long strings with embedded zeros and equal prefixes
  local base = ("\0abc"):rep(1000)
  local x, y = base .. "1", base .. "2"
  log("long cmp", x < y, x == base .. "1", #x)
end

T.section("string.buffer")
do
  local ok, buffer = pcall(require, "string.buffer")
  if not ok then
    log("no string.buffer")
  else
    local b = buffer.new()
    for i = 1, 10000 do b:put(i % 10) end
    b:putf("|%d|%s", 42, "end")
    local s = b:tostring()
    log("buffer", #s, s:sub(-10), T.hash(nil, s))
    log("get", b:get(5), #b)
    b:reset()
    log("reset", #b, b:tostring())
    local enc = buffer.encode({ 1, 2, "three", { four = 4 }, true })
    local dec = buffer.decode(enc)
    log("serialize", T.show(dec))
    log(pcall(buffer.decode, "\255garbage"))
    -- buffer with __tostring objects and errors in put
    local b2 = buffer.new()
    log(pcall(function() b2:put({}) end))
    b2:put(setmetatable({}, { __tostring = function() return "obj" end }))
    log("tostring obj", b2:tostring())
    b2:free()
  end
end

T.section("tostring/tonumber round trips")
do
  local vals = { 0, -0.0, 1, -1, 0.1, 1e300, -1e-300, 2 ^ 53, 2 ^ 63, 1 / 0, -1 / 0, 123456789012 }
  local out = {}
  for i = 1, #vals do out[#out + 1] = tostring(vals[i]) end
  log(table.concat(out, " "))
  log(tonumber("0x10"), tonumber("  12  "), tonumber("1e2"), tonumber("z", 36), tonumber("ff", 16),
      tonumber(""), tonumber("1 2"), tonumber("0x"), tonumber("inf"), tonumber("nan"))
  log(pcall(tonumber, "10", 99))
  log(tostring(nil), tostring(true), ("%s"):format(false))
end

T.done("strings_buffers")
