-- pcall-heavy loop: protected calls that mostly succeed, sometimes fail.
local N = tonumber(arg and arg[1]) or 1000000
local function work(x)
  if x % 97 == 0 then error("bad " .. x) end
  return x * 2
end
local function worktab(x)
  if x % 101 == 0 then error({ code = x }) end
  return x + 1
end
local s, fails = 0, 0
for i = 1, N do
  local ok, v = pcall(work, i)
  if ok then s = s + v else fails = fails + 1 end
  ok, v = pcall(worktab, i)
  if ok then s = s + v else fails = fails + v.code % 3 end
  s = s % 1000000007
end
print(("checksum %d %d"):format(s, fails))
