-- KEYS[1] due deliveries (score: next attempt, ms); ARGV[1] now ms, ARGV[2] lease end ms, ARGV[3] count.
-- A claimed delivery is due again at the lease end, so one whose replica stops mid-attempt is retried.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], ARGV[2], id)
end
return ids
