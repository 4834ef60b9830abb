-- novaConversationBytesHeld (conversations.ts).
-- KEYS: project, storage total, expiry index, sizes, conversation bytes held, reservations, their sizes.
-- ARGV: default bound.
-- Frees what expired and what lapsed, then returns {bytes held (reservations of exchanges in flight
-- included), the project's bound (its own, else the default)}.
-- reconcile(), release_lapsed(), heal_held(): reconcile-storage.lua and conversation-reservations.lua,
-- set before this.
reconcile(KEYS[2], KEYS[3], KEYS[4], KEYS[5], 500)
heal_held(KEYS[3], KEYS[5], KEYS[7])
release_lapsed(KEYS[5], KEYS[6], KEYS[7], 500)
local own = redis.call('HGET', KEYS[1], 'max_conversation_bytes')
return {tonumber(redis.call('GET', KEYS[5]) or '0'), tonumber(own or ARGV[1])}
