-- spin for SECONDS (arg 1): a loop that never sleeps and never allocates
local t_end = os.clock() + (tonumber(arg and arg[1]) or 2)
local function spin()
  local x = 0
  while os.clock() < t_end do
    for i = 1, 10000 do x = (x + i) % 65521 end
  end
  return x
end
io.write(spin() >= 0 and "" or "?")
