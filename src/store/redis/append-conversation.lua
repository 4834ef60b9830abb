-- novaAppendConversation (conversations.ts).
-- KEYS: record (hash), messages (list of JSON), positions (hash message id -> list index),
-- the project's storage expiry index and sizes (usage: frees the bytes when the conversation expires),
-- the conversation bytes the project holds (its bound).
-- ARGV: existing (1/0), project id, conversation id, model, now ISO, retention s, bytes, then (id, json) pairs.
-- Appends in order, renews the TTL of all three keys, returns the record's fields and ttl_ms (false
-- when a continuation found nothing).
if ARGV[1] == '1' then
  if redis.call('EXISTS', KEYS[1]) == 0 then return false end
else
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'id', ARGV[3], 'project_id', ARGV[2], 'created_at', ARGV[5], 'message_count', 0, 'bytes', 0)
  end
end
local n = redis.call('LLEN', KEYS[2])
for i = 8, #ARGV, 2 do
  redis.call('RPUSH', KEYS[2], ARGV[i + 1])
  redis.call('HSET', KEYS[3], ARGV[i], n)
  n = n + 1
end
redis.call('HSET', KEYS[1], 'model', ARGV[4], 'updated_at', ARGV[5], 'message_count', n)
redis.call('HINCRBY', KEYS[1], 'bytes', ARGV[7])
redis.call('EXPIRE', KEYS[1], ARGV[6])
redis.call('EXPIRE', KEYS[2], ARGV[6])
redis.call('EXPIRE', KEYS[3], ARGV[6])
-- Redis's own clock, the one its key expiry follows; the usage store frees these bytes by it.
local time = redis.call('TIME')
local expires = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + tonumber(ARGV[6]) * 1000
redis.call('ZADD', KEYS[4], expires, ARGV[3])
redis.call('HINCRBY', KEYS[5], ARGV[3], ARGV[7])
redis.call('INCRBY', KEYS[6], ARGV[7])
redis.call('EXPIRE', KEYS[4], ARGV[6] + 86400)
redis.call('EXPIRE', KEYS[5], ARGV[6] + 86400)
local record = redis.call('HGETALL', KEYS[1])
table.insert(record, 'ttl_ms')
table.insert(record, redis.call('PTTL', KEYS[1]))
return record
