-- novaDeleteConversation (conversations.ts).
-- KEYS: record, messages, positions, the project's storage expiry index, sizes and conversation bytes held.
-- ARGV: conversation id.
-- Returns the bytes the conversation held (which the caller frees now, so expiry must not free them
-- again), or false when there was none.
local bytes = redis.call('HGET', KEYS[1], 'bytes')
if not bytes then return false end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
if redis.call('HDEL', KEYS[5], ARGV[1]) == 1 then redis.call('DECRBY', KEYS[6], bytes) end
redis.call('ZREM', KEYS[4], ARGV[1])
return tonumber(bytes)
