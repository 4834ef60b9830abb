-- novaUpdateRecord (records-store.ts): updates a managed record's fields and metadata.
-- KEYS: record hash, metadata hash.
-- ARGV[1]: a JSON object {updatedAt, maxMetadataKeys, fields: {name: value as JSON text},
--   metadata: {key: value, or null to remove the key}}.
-- Checks the key limit before writing anything, so an update lands whole or not at all.
-- Returns a JSON object: {error = 'not_found' | 'too_many_metadata_keys'}, or {bytesDelta, record,
-- metadata} with the two hashes' fields after the update.
local RECORD, METADATA = KEYS[1], KEYS[2]
if redis.call('EXISTS', RECORD) == 0 then return cjson.encode({error = 'not_found'}) end
local Q = cjson.decode(ARGV[1])
local function size()
  local n = 0
  for _, v in ipairs(redis.call('HGETALL', RECORD)) do n = n + #v end
  for _, v in ipairs(redis.call('HGETALL', METADATA)) do n = n + #v end
  return n
end
local before = size()
local fields = {'updated_at', Q.updatedAt}
for name, json in pairs(Q.fields) do
  table.insert(fields, 'f:' .. name); table.insert(fields, json)
end
local count = redis.call('HLEN', METADATA)
local sets, dels = {}, {}
for key, value in pairs(Q.metadata) do
  local exists = redis.call('HEXISTS', METADATA, key) == 1
  if value == cjson.null then
    if exists then count = count - 1; table.insert(dels, key) end
  else
    if not exists then count = count + 1 end
    table.insert(sets, key); table.insert(sets, value)
  end
end
if count > Q.maxMetadataKeys then return cjson.encode({error = 'too_many_metadata_keys'}) end
redis.call('HSET', RECORD, unpack(fields))
if #sets > 0 then redis.call('HSET', METADATA, unpack(sets)) end
if #dels > 0 then redis.call('HDEL', METADATA, unpack(dels)) end
local function object(key)
  local out, pairs_ = {}, redis.call('HGETALL', key)
  for i = 1, #pairs_, 2 do out[pairs_[i]] = pairs_[i + 1] end
  return out
end
return cjson.encode({bytesDelta = size() - before, record = object(RECORD), metadata = object(METADATA)})
