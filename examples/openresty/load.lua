-- wrk -s load.lua: a mix of API requests over 64 items and 16 clients;
-- every 8th request takes the /slow path (ngx.sleep), one in 50 has no key;
-- every 5th is /nested/N instead.
local n = 0
local keys = {}

local function checksum(c)
  local h = 2166136261
  for i = 1, 64 do h = (h * 31 + c * i + 7) % 4294967296 end
  return string.format("key-%03d-%08x", c, h)
end

for c = 1, 16 do keys[c] = checksum(c) end

request = function()
  n = n + 1
  if n % 5 == 0 then return wrk.format("GET", "/nested/" .. (n % 97)) end
  local path = "/api/items/" .. (n * 13 % 64 + 1)
  if n % 8 == 0 then path = path .. "/slow" end
  local headers = {}
  if n % 50 ~= 0 then headers["X-Api-Key"] = keys[n % 16 + 1] end
  return wrk.format("GET", path, headers)
end
