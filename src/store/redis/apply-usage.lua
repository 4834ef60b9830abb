-- novaApplyUsage (usage.ts): applies one part of a usage batch of one project, once: the part is
-- claimed against the replica's high-water mark in the same script as the increments, so a retry after
-- a lost reply is a no-op.
-- Each granularity (m, h) and dimension (all, model, api_key) is one hash, a field per
-- bucket (`<start>|<group>` -> `r,pt,ct,img,aud,cu,ca,cpt,cwt,rt,xr,xt,xc,xb,err`), plus a zset index of the fields by
-- start: any window is one ZRANGEBYSCORE and HMGETs of what it finds. The sums are integers
-- below 2^53 (the meter's caps keep them there), so Lua's doubles add them exactly; cost is
-- fixed point (`cu` micro-dollars, `ca` 1e-18 dollars carried into `cu` at 1e12). Buckets
-- past retention leave the hash and index here (a bounded number per call); the keys expire
-- after the retention of their newest bucket. The cache and reasoning tokens (cpt, cwt, rt) came
-- later, last: a bucket written before them holds seven measures, and the missing ones read 0. So did
-- the refusals by limit kind (xr, xt, xc, xb: requests, tokens, concurrency, budget) and the errors
-- (err) after them: a bucket of ten measures reads them 0, and takes them on its next write.
-- Budget corrections (usage-types.ts BudgetCorrection) are added to the budget hash with the usage,
-- so they count exactly once too. One whose settlement may still run (a command that timed out while
-- Redis hung runs when it resumes) counts only if quota-batch.lua has not run a later-or-equal batch
-- of that replica (its `q<replica>` mark), and then leaves `f<replica>:<seq>` so that the settlement,
-- when it comes, skips its budget part: either one counts, never both.
-- A key's own budgets (DESIGN.md section 9) are corrected the same way, under the same fence as its
-- project's: the fence marks live in the project's budget hash, and both count or neither does.
-- KEYS: storage total, applied marks, expiry index, sizes, budget hash, then for m then h, for all,
-- model, api_key: hash, index; then the conversation bytes held; last, the key budget hashes that
-- corrections name (their `kb`, an index into KEYS).
-- ARGV[1]: a JSON object:
--   replica, seq, sub: this part of the batch (claim);
--   dedupMs: how long a replica's mark is kept; storageDelta: bytes stored (+) or freed (-);
--   budgets: [{day, month, dayTokens, monthTokens, monthCost, settledDayTokens, settledMonthTokens,
--     settledMonthCost (what was used: added to the settled sums, quota-batch.lua's `ds`, `ms`, `cs`),
--     replica?, seq? (the fence), kb? (a key's budget hash)}];
--   m, h: per granularity {cutoff (buckets starting before it are dropped), ttlMs (of the keys)};
--   entries: [{dimension ('all', 'model', 'api_key'), group ('' for none), minuteStart, hourStart
--     (strings: the bucket field names' exact starts), requests, promptTokens, completionTokens,
--     imageGenerations, audioMs, costMicros, costAtto, cachedPromptTokens, cacheWriteTokens,
--     reasoningTokens, refusedRequests, refusedTokens, refusedConcurrency, refusedBudget, errors}].
-- Returns the storage total.
-- reconcile(), claim() and PRUNE_LIMIT: set before this by the caller.
local TOTAL, APPLIED, EXPIRY, SIZES, BUDGET, HELD = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[18]
local Q = cjson.decode(ARGV[1])
-- the measures a bucket holds now; an older bucket's fewer ones are read first, the rest start at 0
local MEASURES = 15
-- the bucket keys by granularity and dimension, in the order KEYS holds them
local buckets, k = {}, 6
for _, g in ipairs({'m', 'h'}) do
  buckets[g] = {}
  for _, dimension in ipairs({'all', 'model', 'api_key'}) do
    buckets[g][dimension] = {hash = KEYS[k], index = KEYS[k + 1]}
    k = k + 2
  end
end
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function int(v) return string.format('%d', v) end
-- Whether a correction counts: one the settlement may still make counts only if quota-batch.lua has
-- not run that batch (its `q<replica>` mark), and then fences it off (`f<replica>:<seq>`). Decided once
-- per fence and call, in the project's budget hash, for the project's and its keys' corrections alike.
local fenceCounts = {}
local function counts(c)
  if not c.replica then return true end
  local fence = 'f' .. c.replica .. ':' .. int(c.seq)
  if fenceCounts[fence] == nil then
    local marks = redis.call('HMGET', BUDGET, 'q' .. c.replica, fence)
    local settled = marks[1] and tonumber(string.match(marks[1], '^(%d+)'))
    fenceCounts[fence] = not ((settled and settled >= c.seq) or marks[2])
    if fenceCounts[fence] then redis.call('HSET', BUDGET, fence, int(clock())) end
  end
  return fenceCounts[fence]
end
-- As quota-batch.lua settles: into the stored period when it is theirs; a newer one starts (as an
-- admission there would start it), with nothing settled yet; a period that is over is left alone.
local function correctBudgets(budget, corrections)
  local v = redis.call('HMGET', budget, 'day', 'dt', 'month', 'mt', 'mc', 'ds', 'ms', 'cs')
  local day, dt, month, mt, mc = v[1], tonumber(v[2]) or 0, v[3], tonumber(v[4]) or 0, tonumber(v[5]) or 0
  local ds, ms, cs = tonumber(v[6]) or 0, tonumber(v[7]) or 0, tonumber(v[8]) or 0
  local changed = false
  for _, c in ipairs(corrections) do
    if counts(c) then
      if c.dayTokens ~= 0 or c.settledDayTokens ~= 0 then
        if (not day or day < c.day) and (c.dayTokens > 0 or c.settledDayTokens > 0) then day, dt, ds = c.day, 0, 0 end
        if day == c.day then dt, ds, changed = dt + c.dayTokens, ds + c.settledDayTokens, true end
      end
      if c.monthTokens ~= 0 or c.monthCost ~= 0 or c.settledMonthTokens ~= 0 or c.settledMonthCost ~= 0 then
        if (not month or month < c.month) and (c.monthTokens > 0 or c.monthCost > 0 or c.settledMonthTokens > 0 or c.settledMonthCost > 0) then
          month, mt, mc, ms, cs = c.month, 0, 0, 0, 0
        end
        if month == c.month then
          mt, mc, ms, cs, changed = mt + c.monthTokens, mc + c.monthCost, ms + c.settledMonthTokens, cs + c.settledMonthCost, true
        end
      end
    end
  end
  if changed then
    local fields = {}
    if day then
      for _, f in ipairs({'day', day, 'dt', int(dt), 'ds', int(ds)}) do fields[#fields + 1] = f end
    end
    if month then
      for _, f in ipairs({'month', month, 'mt', int(mt), 'mc', string.format('%.17g', mc), 'ms', int(ms), 'cs', string.format('%.17g', cs)}) do
        fields[#fields + 1] = f
      end
    end
    redis.call('HSET', budget, unpack(fields))
  end
  if redis.call('EXISTS', budget) == 1 then redis.call('PEXPIRE', budget, 32 * 86400000) end
end
-- The settlement marks and fences of replicas silent for keepMs leave once the budget hash holds
-- more than a few: its size follows the replicas that write, never the traffic.
local function pruneFences(budget, keepMs)
  -- 11: the periods, their charges, settled sums and alert marks (quota-batch.lua)
  if redis.call('HLEN', budget) <= 11 + 32 then return end
  local now, all = clock(), redis.call('HGETALL', budget)
  for i = 1, #all, 2 do
    local kind, at = string.sub(all[i], 1, 1), nil
    if kind == 'q' then at = tonumber(string.match(all[i + 1], ':(%d+)$')) end
    if kind == 'f' then at = tonumber(all[i + 1]) end
    if at and at < now - keepMs then redis.call('HDEL', budget, all[i]) end
  end
end
if claim(APPLIED, Q.replica, Q.seq, Q.sub, Q.dedupMs) then
  local touched = {}
  for _, e in ipairs(Q.entries) do
    -- in the order of the stored `r,pt,ct,img,aud,cu,ca,cpt,cwt,rt,xr,xt,xc,xb,err`
    local add = {e.requests, e.promptTokens, e.completionTokens, e.imageGenerations, e.audioMs, e.costMicros, e.costAtto,
      e.cachedPromptTokens, e.cacheWriteTokens, e.reasoningTokens, e.refusedRequests, e.refusedTokens, e.refusedConcurrency,
      e.refusedBudget, e.errors}
    for _, g in ipairs({'m', 'h'}) do
      local bucket = buckets[g][e.dimension]
      local start = g == 'm' and e.minuteStart or e.hourStart
      local member = start .. '|' .. e.group
      local sums = {}
      for f = 1, MEASURES do sums[f] = 0 end
      local old = redis.call('HGET', bucket.hash, member)
      if old then
        local f = 1
        for value in string.gmatch(old, '[^,]+') do
          sums[f] = tonumber(value)
          f = f + 1
        end
      end
      for f = 1, MEASURES do sums[f] = sums[f] + add[f] end
      if sums[7] >= 1e12 then
        local carry = math.floor(sums[7] / 1e12)
        sums[6] = sums[6] + carry
        sums[7] = sums[7] - carry * 1e12
      end
      for f = 1, MEASURES do sums[f] = string.format('%.0f', sums[f]) end
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
  if Q.budgets and #Q.budgets > 0 then
    -- by budget hash (the project's, its keys'): each read and written once
    local byTarget, order = {}, {}
    for _, c in ipairs(Q.budgets) do
      local target = c.kb and KEYS[c.kb] or BUDGET
      if not byTarget[target] then byTarget[target], order[#order + 1] = {}, target end
      table.insert(byTarget[target], c)
    end
    for _, target in ipairs(order) do correctBudgets(target, byTarget[target]) end
  end
end
pruneFences(BUDGET, Q.dedupMs)
reconcile(TOTAL, EXPIRY, SIZES, HELD, PRUNE_LIMIT)
return tonumber(redis.call('GET', TOTAL) or '0')
