-- novaAppendConversation (conversations.ts).
-- KEYS: record (hash), messages (list of JSON), positions (hash message id -> list index),
-- the project's storage expiry index and sizes (usage: frees the bytes when the conversation expires),
-- the conversation bytes the project holds (its bound), the reservations and their sizes.
-- ARGV[1]: a JSON object {existing (true: a continuation, which needs the record), projectId,
--   conversationId, model, now (ISO), retentionSeconds, bytes (the messages' size), reservation
--   (the id reserve-conversation-bytes.lua was given, or '')};
-- ARGV[2…]: the messages, as pairs of id and JSON text (apart from ARGV[1], so that they are not
--   encoded into it a second time).
-- Appends in order, renews the TTL of all three keys, returns the record's fields and ttl_ms
-- ([field, value, …]), or false when a continuation found nothing.
-- The reservation leaves held either way: stored, the messages' size replaces it (counted even past
-- the bound: the reply was served); not stored, it is given back.
-- give_back(): conversation-reservations.lua, set before this by the caller.
local RECORD, MESSAGES, POSITIONS, EXPIRY, SIZES, HELD = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local Q = cjson.decode(ARGV[1])
local ttl, bytes = Q.retentionSeconds, Q.bytes
if Q.reservation ~= '' then give_back(HELD, KEYS[7], KEYS[8], Q.reservation) end
if Q.existing then
  if redis.call('EXISTS', RECORD) == 0 then return false end
else
  if redis.call('EXISTS', RECORD) == 0 then
    redis.call('HSET', RECORD, 'id', Q.conversationId, 'project_id', Q.projectId, 'created_at', Q.now, 'message_count', 0, 'bytes', 0)
  end
end
local n = redis.call('LLEN', MESSAGES)
for i = 2, #ARGV, 2 do
  redis.call('RPUSH', MESSAGES, ARGV[i + 1])
  redis.call('HSET', POSITIONS, ARGV[i], n)
  n = n + 1
end
redis.call('HSET', RECORD, 'model', Q.model, 'updated_at', Q.now, 'message_count', n)
redis.call('HINCRBY', RECORD, 'bytes', bytes)
redis.call('EXPIRE', RECORD, ttl)
redis.call('EXPIRE', MESSAGES, ttl)
redis.call('EXPIRE', POSITIONS, ttl)
-- Redis's own clock, the one its key expiry follows; the usage store frees these bytes by it.
local time = redis.call('TIME')
local expires = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + ttl * 1000
redis.call('ZADD', EXPIRY, expires, Q.conversationId)
redis.call('HINCRBY', SIZES, Q.conversationId, bytes)
redis.call('INCRBY', HELD, bytes)
redis.call('EXPIRE', EXPIRY, ttl + 86400)
redis.call('EXPIRE', SIZES, ttl + 86400)
local record = redis.call('HGETALL', RECORD)
table.insert(record, 'ttl_ms')
table.insert(record, redis.call('PTTL', RECORD))
return record
