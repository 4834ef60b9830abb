-- novaReserveConversationBytes (conversations.ts).
-- KEYS: project, storage total, expiry index, sizes, conversation bytes held, reservations, their sizes.
-- ARGV: default bound, reservation id, bytes, time to live (ms).
-- Frees what expired, then adds the bytes to held only if held + bytes stays within the bound.
-- Returns {1 reserved / 0 refused, bytes held after (refused: as they are), the bound}.
-- reconcile(), release_lapsed(), heal_held(): reconcile-storage.lua and conversation-reservations.lua,
-- set before this.
local HELD, RESERVATIONS, RESERVED = KEYS[5], KEYS[6], KEYS[7]
reconcile(KEYS[2], KEYS[3], KEYS[4], HELD, 500)
heal_held(KEYS[3], HELD, RESERVED)
local now = release_lapsed(HELD, RESERVATIONS, RESERVED, 500)
local bound = tonumber(redis.call('HGET', KEYS[1], 'max_conversation_bytes') or ARGV[1])
local held = tonumber(redis.call('GET', HELD) or '0')
local bytes = tonumber(ARGV[3])
if held + bytes > bound then return {0, held, bound} end
-- The same id twice (a retried command) reserves once.
if redis.call('HSETNX', RESERVED, ARGV[2], bytes) == 0 then return {1, held, bound} end
redis.call('ZADD', RESERVATIONS, now + tonumber(ARGV[4]), ARGV[2])
return {1, redis.call('INCRBY', HELD, bytes), bound}
