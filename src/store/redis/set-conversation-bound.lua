-- novaSetConversationBound (conversations.ts).
-- KEYS: project. ARGV: bound ('' = none). Returns 0 when the project does not exist, else 1.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] == '' then redis.call('HDEL', KEYS[1], 'max_conversation_bytes')
else redis.call('HSET', KEYS[1], 'max_conversation_bytes', ARGV[1]) end
return 1
