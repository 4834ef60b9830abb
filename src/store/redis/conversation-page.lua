-- novaConversationPage (conversations.ts).
-- KEYS: record, messages, positions. ARGV: after id ('' = from the start), limit.
-- Returns {found (1/0), messages...}: limit + 1 messages at most (the last one says there are more).
local start = 0
if ARGV[1] ~= '' then
  local position = redis.call('HGET', KEYS[3], ARGV[1])
  if not position then return {0} end
  start = tonumber(position) + 1
end
local limit = tonumber(ARGV[2])
local page = redis.call('LRANGE', KEYS[2], start, start + limit)
table.insert(page, 1, 1)
return page
