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
-- ARGV: dedup ms, storage delta, cutoff m, cutoff h, key ttl m, key ttl h, replica, seq, sub,
--       then per entry (ENTRY_ARGS values): dimension (1-3), group, minute start, hour start, r, pt,
--       ct, img, aud, cu, ca.
-- Returns the storage total.
-- reconcile(), claim(), ENTRY_ARGS and PRUNE_LIMIT: set before this by the caller.
if claim(KEYS[2], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[1])) then
  local touched = {}
  for a = 10, #ARGV, ENTRY_ARGS do
    local dimension = tonumber(ARGV[a])
    for g = 0, 1 do
      local slot = g * 3 + dimension
      local hash = KEYS[3 + slot * 2]
      local start = ARGV[a + 2 + g]
      local member = start .. '|' .. ARGV[a + 1]
      local sums = {0, 0, 0, 0, 0, 0, 0}
      local old = redis.call('HGET', hash, member)
      if old then
        local f = 1
        for value in string.gmatch(old, '[^,]+') do
          sums[f] = tonumber(value)
          f = f + 1
        end
      end
      for f = 1, 7 do sums[f] = sums[f] + tonumber(ARGV[a + 3 + f]) end
      if sums[7] >= 1e12 then
        local carry = math.floor(sums[7] / 1e12)
        sums[6] = sums[6] + carry
        sums[7] = sums[7] - carry * 1e12
      end
      for f = 1, 7 do sums[f] = string.format('%.0f', sums[f]) end
      redis.call('HSET', hash, member, table.concat(sums, ','))
      redis.call('ZADD', KEYS[4 + slot * 2], start, member)
      touched[slot] = true
    end
  end
  for slot, _ in pairs(touched) do
    local g = math.floor((slot - 1) / 3)
    local hash = KEYS[3 + slot * 2]
    local index = KEYS[4 + slot * 2]
    local old = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. ARGV[3 + g], 'LIMIT', 0, PRUNE_LIMIT)
    if #old > 0 then
      redis.call('HDEL', hash, unpack(old))
      redis.call('ZREM', index, unpack(old))
    end
    redis.call('PEXPIRE', hash, ARGV[5 + g])
    redis.call('PEXPIRE', index, ARGV[5 + g])
  end
  local delta = tonumber(ARGV[2])
  if delta ~= 0 then redis.call('INCRBY', KEYS[1], ARGV[2]) end
end
reconcile(KEYS[1], KEYS[3], KEYS[4], KEYS[#KEYS], PRUNE_LIMIT)
return tonumber(redis.call('GET', KEYS[1]) or '0')
