-- Reservations of room for conversations being written (reserve-conversation-bytes.lua): each one's
-- bytes are in the project's conversation bytes held from when it is made until it is converted
-- into a stored size (append-conversation.lua), given back (release-conversation-bytes.lua) or
-- lapses. Keys: conversation bytes held, reservations (zset: id -> deadline ms, Redis's clock),
-- their sizes (hash: id -> bytes). Only HDEL's answer decides a decrement, so a reservation leaves
-- held once whichever way it goes, and held never goes below what the live conversations hold.
-- Functions for other scripts: their callers put this file before them.
local function give_back(held, reservations, sizes, id)
  local bytes = tonumber(redis.call('HGET', sizes, id) or '0')
  if redis.call('HDEL', sizes, id) == 1 and bytes ~= 0 then redis.call('DECRBY', held, bytes) end
  redis.call('ZREM', reservations, id)
end

-- Gives back reservations past their deadline (a replica that died or lost the store mid-call),
-- at most `limit` per call, so that no reservation holds room for ever.
local function release_lapsed(held, reservations, sizes, limit)
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', reservations, '-inf', now, 'LIMIT', 0, limit)) do
    give_back(held, reservations, sizes, id)
  end
  return now
end

-- Held is the stored sizes (the expiry index and sizes of reconcile-storage.lua) plus the live
-- reservations. The index and sizes expire a day after the project's last write
-- (append-conversation.lua), by when every conversation in them has expired; if no reconcile ran in
-- that day, their bytes would stay in held for ever. With no index, held is the reservations alone.
local function heal_held(expiry, held, sizes)
  if redis.call('EXISTS', expiry) == 1 then return end
  local bytes = 0
  for _, value in ipairs(redis.call('HVALS', sizes)) do bytes = bytes + tonumber(value) end
  if bytes == 0 then redis.call('DEL', held) else redis.call('SET', held, bytes) end
end
