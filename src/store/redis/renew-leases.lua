-- novaRenewLeases (redis-quota-store.ts): extends the leases that still exist.
-- KEYS: leases. ARGV: lease TTL ms, lease ids…
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ttl + 1000)
return 1
