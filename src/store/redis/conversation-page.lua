-- novaConversationPage (conversations.ts).
-- KEYS: record, messages, positions. ARGV: after id ('' = from the start), limit.
-- Returns up to limit + 1 messages (JSON texts; one more than limit says there are more), or false
-- when the after id is not in the conversation.
local MESSAGES, POSITIONS = KEYS[2], KEYS[3]
local after, limit = ARGV[1], tonumber(ARGV[2])
local start = 0
if after ~= '' then
  local position = redis.call('HGET', POSITIONS, after)
  if not position then return false end
  start = tonumber(position) + 1
end
return redis.call('LRANGE', MESSAGES, start, start + limit)
