-- claim(applied, replica, seq, sub, keepMs): claims a write for a replica: true when (seq, sub) is
-- past the replica's high-water mark in the project's `applied` hash (then the mark moves), false when
-- it was applied already. Marks of replicas silent for keepMs are pruned once the hash holds more than
-- 16, and the hash expires keepMs after the last write: its size follows the replicas that write, never
-- the request rate.
-- A function for apply-usage.lua: its caller puts this file before it.
local function claim(applied, replica, seq, sub, keepMs)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local mark = redis.call('HGET', applied, replica)
  if mark then
    local s, u = string.match(mark, '^(%d+):(%d+):')
    s = tonumber(s)
    if s > seq or (s == seq and tonumber(u) >= sub) then return false end
  end
  redis.call('HSET', applied, replica, string.format('%d:%d:%d', seq, sub, now))
  if redis.call('HLEN', applied) > 16 then
    local all = redis.call('HGETALL', applied)
    for i = 1, #all, 2 do
      if tonumber(string.match(all[i + 1], ':(%d+)$')) < now - keepMs then redis.call('HDEL', applied, all[i]) end
    end
  end
  redis.call('PEXPIRE', applied, keepMs)
  return true
end
