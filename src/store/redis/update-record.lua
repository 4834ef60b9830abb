-- novaUpdateRecord (records-store.ts): updates a managed record's fields and metadata.
-- KEYS: record hash, metadata hash. ARGV: updated_at, max metadata keys, field count,
-- then field pairs (name, JSON), then metadata pairs (key, 's'..value | 'd').
-- Checks the key limit before writing anything, so an update lands whole or not at all.
-- Returns {bytes delta, record fields, metadata fields}; {-1}: no such record; {-2}: too many metadata keys.
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local function size()
  local n = 0
  for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do n = n + #v end
  for _, v in ipairs(redis.call('HGETALL', KEYS[2])) do n = n + #v end
  return n
end
local before = size()
local fields = {'updated_at', ARGV[1]}
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  table.insert(fields, 'f:' .. ARGV[i]); table.insert(fields, ARGV[i + 1]); i = i + 2
end
local count = redis.call('HLEN', KEYS[2])
local sets, dels = {}, {}
while i <= #ARGV do
  local key, value = ARGV[i], ARGV[i + 1]
  local exists = redis.call('HEXISTS', KEYS[2], key) == 1
  if value == 'd' then
    if exists then count = count - 1; table.insert(dels, key) end
  else
    if not exists then count = count + 1 end
    table.insert(sets, key); table.insert(sets, string.sub(value, 2))
  end
  i = i + 2
end
if count > tonumber(ARGV[2]) then return {-2} end
redis.call('HSET', KEYS[1], unpack(fields))
if #sets > 0 then redis.call('HSET', KEYS[2], unpack(sets)) end
if #dels > 0 then redis.call('HDEL', KEYS[2], unpack(dels)) end
return {size() - before, redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
