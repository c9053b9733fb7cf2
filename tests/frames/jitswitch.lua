-- jit.flush() and jit.off()/jit.on() in the middle of a run:
-- driver -> work -> spin, with traces thrown away and recompiled.
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function work(n) return spin(n) + 0 end
local function driver(rounds)
  local s = 0
  for r = 1, rounds do
    if r % 50 == 0 then jit.flush() end
    if r % 300 == 100 then jit.off() elseif r % 300 == 200 then jit.on() end
    s = s + work(20000)
  end
  return s
end
print(driver(tonumber(arg[1]) or 2000))
