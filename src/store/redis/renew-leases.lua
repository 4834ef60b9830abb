-- novaRenewLeases (redis-quota-store.ts): extends the leases that still exist.
-- KEYS: leases. ARGV[1]: a JSON object {leaseTtlMs, ids: [lease id…]}.
local R = cjson.decode(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = R.leaseTtlMs
for _, id in ipairs(R.ids) do redis.call('ZADD', KEYS[1], 'XX', now + ttl, id) end
redis.call('PEXPIRE', KEYS[1], ttl + 1000)
return 1
