-- novaConversationBytesHeld (conversations.ts).
-- KEYS: project, storage total, expiry index, sizes, conversation bytes held. ARGV: default bound.
-- Frees what expired, then returns {bytes held, the project's bound (its own, else the default)}.
-- reconcile(): reconcile-storage.lua, set before this by the caller.
reconcile(KEYS[2], KEYS[3], KEYS[4], KEYS[5], 500)
local own = redis.call('HGET', KEYS[1], 'max_conversation_bytes')
return {tonumber(redis.call('GET', KEYS[5]) or '0'), tonumber(own or ARGV[1])}
