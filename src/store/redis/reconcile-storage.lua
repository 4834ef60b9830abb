-- reconcile(total, expiry, sizes, held, limit): frees the storage of things that expired
-- (conversations): their sizes leave the total and the bytes held in conversations. By Redis's clock,
-- the one key expiry follows. Keys: storage total, expiry index (zset: id -> expiry ms), sizes
-- (hash: id -> bytes), conversation bytes held; at most `limit` things per call.
-- A function for other scripts (apply-usage, storage-bytes, conversation-bytes-held): their callers
-- put this file before them.
local function reconcile(total, expiry, sizes, held, limit)
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local gone = redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(gone) do
    local bytes = tonumber(redis.call('HGET', sizes, id) or '0')
    if bytes ~= 0 then
      redis.call('DECRBY', total, bytes)
      redis.call('DECRBY', held, bytes)
    end
    redis.call('HDEL', sizes, id)
    redis.call('ZREM', expiry, id)
  end
end
