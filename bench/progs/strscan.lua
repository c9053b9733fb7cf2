-- String scanning: string.byte, sub, find (plain and pattern), upper.
local N = tonumber(arg and arg[1]) or 300
local text = {}
for i = 1, 2000 do text[#text + 1] = "word" .. (i % 37) .. " " end
text = table.concat(text)
local acc = 0
for round = 1, N do
  local b = 0
  for i = 1, #text, 3 do b = b + text:byte(i) end
  local pos, cnt = 1, 0
  while true do
    local a, e = text:find("word1", pos, true)
    if not a then break end
    cnt = cnt + 1; pos = e + 1
  end
  local digits = 0
  for d in text:gmatch("%d+") do digits = digits + #d end
  local sub = text:sub(round % 100 + 1, round % 100 + 50):upper()
  acc = (acc + b + cnt * 7 + digits + sub:byte(1)) % 1000000007
end
print(("checksum %d"):format(acc))
