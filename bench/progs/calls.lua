-- Many small non-inlinable calls through function tables (call/return
-- sequences of the interpreter and trace calls).
local N = tonumber(arg and arg[1]) or 3000000
local ops = {
  function(a, b) return a + b end,
  function(a, b) return a - b end,
  function(a, b) return (a * b) % 1000003 end,
  function(a, b) return a + 2 * b end,
}
local function apply(i, a, b) return ops[i % 4 + 1](a, b) end
local acc = 1
for i = 1, N do
  acc = apply(i, acc, i) % 1000000007
  if acc < 0 then acc = -acc end
end
print(("checksum %d"):format(acc))
