-- A small catalogue API of the kind OpenResty runs in front of a backend:
--   access  (api_access): API key checked with ngx.re, per-key request count
--           in a shared dict, 401 without a valid key
--   content (api_content): GET /api/items/ID[/slow]: the item comes from a
--           shared-dict cache or from the backend over a cosocket (HTTP/1.0
--           to the second server block), is decoded with cjson, enriched in
--           Lua and encoded again; /slow first yields in ngx.sleep and ranks
--           the item after the coroutine is resumed
--   log     (api_log): status and latency counters, a structured log line
--   timer   (refresh_summary, every 50 ms in each worker): summarises the
--           counters into a JSON document served at /stats
--   backend (backend_item): the "upstream", deterministic JSON per item id
--   nested  (nested): GET /nested/N: loops three deep across functions, the
--           shape JIT traces enter from other traces (checksum as text)
-- Responses of /api/ depend only on the request: the identity test compares
-- them byte for byte across nginx builds.

local cjson = require "cjson"

local M = {}

local WORDS = { "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
                "hotel", "india", "juliet", "kilo", "lima", "mike", "november",
                "oscar", "papa", "quebec", "romeo", "sierra", "tango" }

local backend_port

-- Master process (init_by_lua): configuration. LJPERF_APP_JIT=off (read
-- here, in the master's environment) runs the app without the JIT compiler.
function M.init(port)
  backend_port = tonumber(port)
  if os.getenv("LJPERF_APP_JIT") == "off" then jit.off() end
end

-- Access phase ---------------------------------------------------------------

-- Keys look like key-NNN-xxxxxxxx where xxxxxxxx is a checksum of NNN.
local function key_checksum(n)
  local h = 2166136261
  for i = 1, 64 do
    h = (h * 31 + n * i + 7) % 4294967296
  end
  return string.format("%08x", h)
end

local function check_key(key)
  if not key then return nil end
  local m = ngx.re.match(key, [[^key-(\d{3})-([0-9a-f]{8})$]], "jo")
  if not m then return nil end
  local n = tonumber(m[1])
  if key_checksum(n) ~= m[2] then return nil end
  return n
end

function M.make_key(n)
  return string.format("key-%03d-%s", n, key_checksum(n))
end

function M.api_access()
  local client = check_key(ngx.var.http_x_api_key)
  if not client then
    return ngx.exit(401)
  end
  ngx.shared.stats:incr("client:" .. client, 1, 0)
  ngx.ctx.client = client
end

-- Content phase ----------------------------------------------------------------

local function fetch_backend(id)
  local sock = ngx.socket.tcp()
  sock:settimeout(2000)
  local ok, err = sock:connect("127.0.0.1", backend_port)
  if not ok then return nil, "connect: " .. err end
  sock:send("GET /item/" .. id .. " HTTP/1.0\r\nHost: backend\r\n\r\n")
  local raw, rerr = sock:receive("*a")
  sock:close()
  if not raw then return nil, "receive: " .. rerr end
  local from, to = ngx.re.find(raw, [[\r\n\r\n]], "jo")
  if not from then return nil, "bad response" end
  return raw:sub(to + 1)
end

local function load_item(id)
  local cache = ngx.shared.cache
  local body = cache:get(id)
  if not body then
    local err
    body, err = fetch_backend(id)
    if not body then return nil, err end
    if id % 4 == 0 then cache:set(id, body, 1) end   -- hot items are cached
  end
  return cjson.decode(body)
end

local function word_stats(text)
  local counts, longest = {}, ""
  for w in ngx.re.gmatch(text, [[[a-z]+]], "jo") do
    local word = w[0]
    counts[word] = (counts[word] or 0) + 1
    if #word > #longest then longest = word end
  end
  local distinct = 0
  for _ in pairs(counts) do distinct = distinct + 1 end
  return distinct, longest
end

local function price_table(item)
  local rows = {}
  for qty = 1, 40 do
    local discount = qty >= 20 and 0.9 or (qty >= 10 and 0.95 or 1)
    rows[qty] = math.floor(item.price * qty * discount * 100 + 0.5) / 100
  end
  return rows
end

-- Rank after the coroutine was resumed (ngx.sleep yields to nginx).
local function rank_after_sleep(item)
  local score = 0
  for i = 1, 3000 do
    score = (score + item.id * i + #item.name) % 1000003
  end
  return score
end

-- cjson encodes a table's keys in hash order: encode in a fixed order.
local function encode_ordered(t, keys)
  local parts = {}
  for i, k in ipairs(keys) do
    parts[i] = cjson.encode(k) .. ":" .. cjson.encode(t[k])
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

local FIELDS = { "id", "name", "price", "tags", "distinct_words", "longest_word",
                 "prices", "rank" }

local function render(item, slow)
  local out = { id = item.id, name = item.name, price = item.price, tags = item.tags }
  out.distinct_words, out.longest_word = word_stats(item.description)
  out.prices = price_table(item)
  if slow then
    ngx.sleep(0.001)
    out.rank = rank_after_sleep(item)
  else
    out.rank = 0
  end
  return encode_ordered(out, FIELDS)
end

function M.api_content()
  local m = ngx.re.match(ngx.var.uri, [[^/api/items/(\d+)(/slow)?$]], "jo")
  if not m then
    return ngx.exit(404)
  end
  local item, err = load_item(tonumber(m[1]))
  if not item then
    ngx.log(ngx.ERR, "backend: ", err)
    return ngx.exit(502)
  end
  ngx.header.content_type = "application/json"
  ngx.say(render(item, m[2] ~= nil))
end

-- Log phase --------------------------------------------------------------------

local function latency_bucket(ms)
  local b = 1
  while b < ms and b < 4096 do b = b * 2 end
  return b
end

-- A structured access-log line (kept as the last line per status).
local function log_line(ms)
  local parts = {}
  local fields = { "uri", "request_method", "remote_addr", "server_port", "status",
                   "body_bytes_sent", "http_x_api_key", "request_length" }
  for i, f in ipairs(fields) do
    local v = ngx.var[f] or "-"
    parts[i] = string.format("%s=%q", f, v)
  end
  parts[#parts + 1] = string.format("ms=%.3f", ms)
  parts[#parts + 1] = "client=" .. tostring(ngx.ctx.client)
  return table.concat(parts, " ")
end

function M.api_log()
  local stats = ngx.shared.stats
  stats:incr("status:" .. ngx.status, 1, 0)
  local ms = (ngx.now() - ngx.req.start_time()) * 1000
  stats:incr("latency_le_ms:" .. latency_bucket(ms), 1, 0)
  ngx.shared.cache:set("last_log:" .. ngx.status, log_line(ms))
end

-- Timer --------------------------------------------------------------------------

local function summarise(stats)
  local keys = stats:get_keys(0)
  table.sort(keys)
  local summary = { clients = 0, requests = 0, by_status = {}, latency = {} }
  for _, k in ipairs(keys) do
    local v = stats:get(k)
    local kind, name = k:match("^([%w_]+):(.+)$")
    if kind == "client" then
      summary.clients = summary.clients + 1
      summary.requests = summary.requests + v
    elseif kind == "status" then
      summary.by_status[name] = v
    elseif kind == "latency_le_ms" then
      summary.latency[name] = v
    end
  end
  -- a moving checksum keeps the timer's Lua work visible in a profile
  local check = 0
  for i = 1, 2000 do check = (check * 33 + i + summary.requests) % 65521 end
  summary.check = check
  return summary
end

local function refresh_summary(premature)
  if premature then return end
  local stats = ngx.shared.stats
  ngx.shared.cache:set("summary", cjson.encode(summarise(stats)))
end

function M.init_worker()
  local ok, err = ngx.timer.every(0.05, refresh_summary)
  if not ok then ngx.log(ngx.ERR, "timer: ", err) end
end

function M.stats()
  ngx.header.content_type = "application/json"
  ngx.say(ngx.shared.cache:get("summary") or "{}")
end

-- Nested loops ---------------------------------------------------------------------

local function nest_inner(seed, n)
  local h = seed
  for i = 1, n do h = (h * 31 + i) % 1000003 end
  return h
end

local function nest_mid(seed, n)
  local h = 0
  for i = 1, n do h = (h + nest_inner(seed + i, 60)) % 1000003 end
  return h
end

local function nest_outer(seed, n)
  local h = 0
  for i = 1, n do h = (h + nest_mid(seed * 7 + i, 12)) % 1000003 end
  return h
end

function M.nested()
  local n = tonumber(ngx.var.uri:match("^/nested/(%d+)$"))
  if not n then return ngx.exit(404) end
  ngx.say(nest_outer(n, 6))
end

-- Backend ------------------------------------------------------------------------

function M.backend_item()
  local id = tonumber(ngx.var.uri:match("^/item/(%d+)$"))
  if not id then return ngx.exit(404) end
  local words = {}
  for i = 1, 60 do
    words[i] = WORDS[(id * 7 + i * i) % #WORDS + 1]
  end
  local item = {
    id = id,
    name = "item-" .. id,
    price = (id * 37 % 1000) / 10 + 0.99,
    tags = { WORDS[id % #WORDS + 1], WORDS[(id * 3) % #WORDS + 1] },
    description = table.concat(words, " "),
  }
  ngx.header.content_type = "application/json"
  ngx.print(cjson.encode(item))
end

return M
