-- novaApplyUsage (usage.ts): applies one part of a usage batch of one project, once: the part is
-- claimed against the replica's high-water mark in the same script as the increments, so a retry after
-- a lost reply is a no-op.
-- Each granularity (m, h) and dimension (all, model, api_key) is one hash, a field per
-- bucket (`<start>|<group>` -> `r,pt,ct,img,aud,cu,ca`), plus a zset index of the fields by
-- start: any window is one ZRANGEBYSCORE and HMGETs of what it finds. The sums are integers
-- below 2^53 (the meter's caps keep them there), so Lua's doubles add them exactly; cost is
-- fixed point (`cu` micro-dollars, `ca` 1e-18 dollars carried into `cu` at 1e12). Buckets
-- past retention leave the hash and index here (a bounded number per call); the keys expire
-- after the retention of their newest bucket.
-- KEYS: storage total, applied marks, expiry index, sizes, then for m then h, for all, model, api_key:
-- hash, index; last, the conversation bytes held.
-- ARGV[1]: a JSON object:
--   replica, seq, sub: this part of the batch (claim);
--   dedupMs: how long a replica's mark is kept; storageDelta: bytes stored (+) or freed (-);
--   m, h: per granularity {cutoff (buckets starting before it are dropped), ttlMs (of the keys)};
--   entries: [{dimension ('all', 'model', 'api_key'), group ('' for none), minuteStart, hourStart
--     (strings: the bucket field names' exact starts), requests, promptTokens, completionTokens,
--     imageGenerations, audioMs, costMicros, costAtto}].
-- Returns the storage total.
-- reconcile(), claim() and PRUNE_LIMIT: set before this by the caller.
local TOTAL, APPLIED, EXPIRY, SIZES, HELD = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[#KEYS]
local Q = cjson.decode(ARGV[1])
-- the bucket keys by granularity and dimension, in the order KEYS holds them
local buckets, k = {}, 5
for _, g in ipairs({'m', 'h'}) do
  buckets[g] = {}
  for _, dimension in ipairs({'all', 'model', 'api_key'}) do
    buckets[g][dimension] = {hash = KEYS[k], index = KEYS[k + 1]}
    k = k + 2
  end
end
if claim(APPLIED, Q.replica, Q.seq, Q.sub, Q.dedupMs) then
  local touched = {}
  for _, e in ipairs(Q.entries) do
    -- in the order of the stored `r,pt,ct,img,aud,cu,ca`
    local add = {e.requests, e.promptTokens, e.completionTokens, e.imageGenerations, e.audioMs, e.costMicros, e.costAtto}
    for _, g in ipairs({'m', 'h'}) do
      local bucket = buckets[g][e.dimension]
      local start = g == 'm' and e.minuteStart or e.hourStart
      local member = start .. '|' .. e.group
      local sums = {0, 0, 0, 0, 0, 0, 0}
      local old = redis.call('HGET', bucket.hash, member)
      if old then
        local f = 1
        for value in string.gmatch(old, '[^,]+') do
          sums[f] = tonumber(value)
          f = f + 1
        end
      end
      for f = 1, 7 do sums[f] = sums[f] + add[f] end
      if sums[7] >= 1e12 then
        local carry = math.floor(sums[7] / 1e12)
        sums[6] = sums[6] + carry
        sums[7] = sums[7] - carry * 1e12
      end
      for f = 1, 7 do sums[f] = string.format('%.0f', sums[f]) end
      redis.call('HSET', bucket.hash, member, table.concat(sums, ','))
      redis.call('ZADD', bucket.index, start, member)
      touched[bucket] = g
    end
  end
  for bucket, g in pairs(touched) do
    local old = redis.call('ZRANGEBYSCORE', bucket.index, '-inf', '(' .. Q[g].cutoff, 'LIMIT', 0, PRUNE_LIMIT)
    if #old > 0 then
      redis.call('HDEL', bucket.hash, unpack(old))
      redis.call('ZREM', bucket.index, unpack(old))
    end
    redis.call('PEXPIRE', bucket.hash, Q[g].ttlMs)
    redis.call('PEXPIRE', bucket.index, Q[g].ttlMs)
  end
  if Q.storageDelta ~= 0 then redis.call('INCRBY', TOTAL, string.format('%d', Q.storageDelta)) end
end
reconcile(TOTAL, EXPIRY, SIZES, HELD, PRUNE_LIMIT)
return tonumber(redis.call('GET', TOTAL) or '0')
