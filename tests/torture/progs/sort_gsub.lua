-- Callbacks from C library functions into Lua: table.sort comparators
-- (including failing and inconsistent ones), string.gsub with function,
-- table and pattern replacements, gmatch/find with captures.
local T = dofile("progs/_tlib.lua")
local log, check, eq, msg = T.log, T.check, T.eq, T.msg

-- Deterministic pseudo random numbers (LCG, exact in doubles).
local seed = 12345
local function rnd(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n
end

T.section("table.sort with Lua comparators")
do
  for _, n in ipairs({ 0, 1, 2, 3, 10, 100, 1000, 5000 }) do
    local t = {}
    for i = 1, n do t[i] = rnd(1000) end
    local calls = 0
    table.sort(t, function(a, b) calls = calls + 1; return a > b end)
    for i = 2, n do check(t[i - 1] >= t[i], "descending") end
    local h = 0
    for i = 1, n do h = T.hash(h, t[i]) end
    log("n", n, "calls>0", calls > 0 or n < 2, "hash", h)
  end
  -- records sorted by two keys; comparator with upvalues and method calls
  local recs = {}
  for i = 1, 500 do recs[i] = { k = rnd(20), id = i, name = "r" .. rnd(100) } end
  local cmp = {}
  function cmp:less(a, b)
    if a.k ~= b.k then return a.k < b.k end
    return a.id < b.id
  end
  table.sort(recs, function(a, b) return cmp:less(a, b) end)
  local h = 0
  for i = 1, #recs do h = T.hash(h, recs[i].k .. ":" .. recs[i].id) end
  log("records", recs[1].k, recs[1].id, recs[500].k, recs[500].id, h)
  -- strings, default comparator
  local words = {}
  for i = 1, 300 do words[i] = string.char(97 + rnd(26), 97 + rnd(26), 97 + rnd(26)) end
  table.sort(words)
  log("words", words[1], words[150], words[300])
end

T.section("errors in sort comparators")
do
  for _, at in ipairs({ 1, 50, 300 }) do
    local t = {}
    for i = 1, 400 do t[i] = rnd(10000) end
    local calls = 0
    local ok, e = pcall(table.sort, t, function(a, b)
      calls = calls + 1
      if calls == at then error("cmp fails at " .. at) end
      return a < b
    end)
    log(at, ok, msg(e))
    -- the table still holds the same multiset of values
    local cnt = 0
    for i = 1, 400 do if type(t[i]) == "number" then cnt = cnt + 1 end end
    eq(cnt, 400, "values kept")
  end
  -- error objects that are tables, errors at depth inside the comparator
  local ok, e = pcall(table.sort, { 3, 1, 2 }, function(a, b)
    local function d(n) if n == 0 then error({ a = a, b = b }) end return d(n - 1) + 0 end
    return d(200)
  end)
  log("table err", ok, type(e))
  -- comparing incompatible values with the default comparator
  log(pcall(table.sort, { 1, "x", 2 }))
  -- an inconsistent comparator: "invalid order function" or a result
  local t = {}
  for i = 1, 200 do t[i] = rnd(50) end
  local ok2, e2 = pcall(table.sort, t, function(a, b) return true end)
  log("always-true", ok2, ok2 and "sorted" or msg(e2))
  -- comparator that sorts a nested table (re-entrant sort)
  local outer = {}
  for i = 1, 30 do outer[i] = { rnd(100), rnd(100), rnd(100) } end
  table.sort(outer, function(a, b)
    table.sort(a); table.sort(b)
    return a[1] < b[1] or (a[1] == b[1] and a[3] < b[3])
  end)
  log("nested sort", outer[1][1], outer[30][1])
  -- yield inside a comparator is an error, caught
  local co = coroutine.create(function()
    return pcall(table.sort, { 2, 1 }, function(a, b) coroutine.yield(); return a < b end)
  end)
  log(coroutine.resume(co))
end

T.section("gsub with function, table and string replacements")
do
  local s = ("The quick brown fox jumps over the lazy dog. "):rep(20)
  local n = 0
  local r, cnt = s:gsub("%w+", function(w)
    n = n + 1
    if #w == 3 then return w:upper() end
    if #w == 5 then return nil end           -- keep original
    if w == "lazy" then return false end     -- keep original
    return #w
  end)
  log("fn", cnt, n, #r, r:sub(1, 60))
  local map = { quick = "slow", fox = "cat", dog = 42 }
  log("tbl", (s:sub(1, 45):gsub("%a+", map)))
  log("str", ("hello world"):gsub("(o)", "[%1%1]"))
  log("pos", ("abc"):gsub("()", "%1"))
  log("whole", ("abc"):gsub("%w", "%0%0"))
  log("limit", ("aaaa"):gsub("a", "b", 2))
  log("anchor", ("aaa"):gsub("^a", "X"))
  log("balanced", ("f(a(b)c) g(d)"):gsub("%b()", function(x) return "<" .. #x .. ">" end))
  log("frontier", ("THE (quick) fox"):gsub("%f[%a]%a+", string.lower))
  log("captures", ("k1=v1, k2=v2"):gsub("(%w+)=(%w+)", "%2=%1"))
  log(pcall(string.gsub, "x", "(", "y"))
  log(pcall(string.gsub, "x", "x", "%2"))
  log(pcall(string.gsub, "abc", "%w", function() return {} end))
  -- error in the replacement function at depth, caught
  local ok, e = pcall(string.gsub, s, "%w+", function(w)
    if w == "over" then
      local function d(k) if k == 0 then error("over!") end return d(k - 1) + 1 end
      return d(100)
    end
  end)
  log(ok, msg(e))
  -- replacement function calling gsub recursively
  local function rev(str, depth)
    if depth == 0 then return str end
    return (str:gsub("(%w)(%w*)", function(a, b) return rev(b, depth - 1) .. a end))
  end
  log("recursive", rev("abcdefgh ijklmnop", 8))
end

T.section("gmatch, find, match with captures")
do
  local text = {}
  for i = 1, 200 do text[#text + 1] = "id" .. i .. "=" .. (i * 37 % 101) end
  text = table.concat(text, ";")
  local sum, cnt = 0, 0
  for k, v in text:gmatch("id(%d+)=(%d+)") do
    sum = sum + tonumber(k) * tonumber(v); cnt = cnt + 1
  end
  log("gmatch", cnt, sum)
  log(text:find("id17=", 1, true), text:find("id(1%d)=(%d+)"))
  log(("  trim me  "):match("^%s*(.-)%s*$"))
  log(("2024-01-15"):match("(%d+)-(%d+)-(%d+)"))
  log(("key = value"):match("()(%w+)()"))
  log(string.find("abc", "b", -10), string.find("abc", "", 10), string.find("", ""))
  -- heavy backtracking pattern
  local hay = ("a"):rep(300) .. "b"
  log(hay:find(("a?"):rep(30) .. ("a"):rep(30)))
  log(pcall(string.rep, "x", -1))
  log(#string.rep("ab", 1000, ","))
end

T.section("hot loop calling gsub and sort")
do
  local acc = 0
  for i = 1, 3000 do
    local s = tostring(i * 7919)
    local r = s:gsub("%d", function(d) return d + 1 end)
    acc = acc + #r
    if i % 300 == 0 then
      local t = { i % 7, i % 5, i % 3, i % 11 }
      table.sort(t, function(a, b) return a > b end)
      acc = acc + t[1]
    end
  end
  log("hot", acc)
end

T.done("sort_gsub")
