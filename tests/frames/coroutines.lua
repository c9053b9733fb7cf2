-- Coroutine chain: driver resumes level1 (a wrap), which resumes level2,
-- which resumes level3, which runs spin. The driver resumes either directly
-- or through deeper(), a different C stack depth for the same coroutine.
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function level3(n) while true do n = coroutine.yield(spin(n) + 0) end end
local function level2(n)
  local co = coroutine.create(level3)
  while true do local _, r = coroutine.resume(co, n) n = coroutine.yield(r + 0) end
end
local function level1(n)
  local co = coroutine.create(level2)
  while true do local _, r = coroutine.resume(co, n) n = coroutine.yield(r + 0) end
end
local function deeper(co, n) local r = co(n) return r end
local function driver(rounds)
  local co = coroutine.wrap(level1)
  local s = 0
  for r = 1, rounds do
    if r % 2 == 0 then s = s + co(20000) else s = s + deeper(co, 20000) end
  end
  return s
end
print(driver(tonumber(arg[1]) or 200))
