-- String building and formatting: .., string.format, table.concat, rep.
local N = tonumber(arg and arg[1]) or 100000
local parts = {}
local h = 0
for i = 1, N do
  local s = ("%d:%s:%5.2f"):format(i, "v" .. (i % 100), i / 7)
  parts[#parts + 1] = s
  if #parts == 1000 then
    local joined = table.concat(parts, ",")
    h = (h * 31 + #joined + joined:byte(#joined)) % 1000000007
    parts = {}
  end
  local t = "a" .. i .. "b" .. (i * 2) .. "c"
  h = (h + #t) % 1000000007
end
print(("checksum %d"):format(h))
