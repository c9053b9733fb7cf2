-- pprof.lines (test_pprof.py): spin's loop on line 6 does one unit of work
-- per call, the loop on line 7 three; run calls spin on line 13, the main
-- chunk calls run on line 17. The test asserts these line numbers.
local function spin(n)
  local s = 0
  for i = 1, n do s = s + i * 0.5 end
  for i = 1, 3 * n do s = s - i * 0.25 end
  return s
end
local function run(dur)
  local t0, x = os.clock(), 0
  while os.clock() - t0 < dur do
    x = x + spin(100000)
  end
  return x
end
io.write(run(tonumber(arg[1]) or 1), "\n")
