-- novaReadUsage (usage.ts).
-- KEYS: hash, index. ARGV: start ms, end ms (excluded).
-- Returns member, measures (`r,pt,…`) per bucket, oldest first; a missing one as '0' (usage.ts reads
-- what a value leaves out as 0).
local members = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[1], '(' .. ARGV[2])
local out = {}
for i = 1, #members, 1000 do
  local chunk = {unpack(members, i, math.min(i + 999, #members))}
  local values = redis.call('HMGET', KEYS[1], unpack(chunk))
  for j = 1, #chunk do
    out[#out + 1] = chunk[j]
    out[#out + 1] = values[j] or '0'
  end
end
return out
