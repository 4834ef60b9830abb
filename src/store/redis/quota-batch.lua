-- novaQuotaBatch (redis-quota-store.ts).
-- The admission and settlement script (run atomically by Redis). Every key carries the
-- project's `{project_id}` hash tag, so it runs on Redis Cluster. The clock is Redis's own (TIME).
--
-- Constant memory per project:
-- - `rl:window`, a sorted set of admission times, only while requests_per_minute <= the exact-log
--   maximum (at most that many members): the exact sliding log.
-- - `rl:sub`, one hash of sub-window counters: `r<k>` requests and `t<k>` tokens charged in absolute
--   sub-window k (window / N ms long), their running sums `rs`/`ts`, and `low`, the oldest
--   sub-window still held. At most 2 (N + 1) + 5 fields; older sub-windows are subtracted and
--   deleted as time passes. The window's count includes the whole of the oldest sub-window, which
--   lies only partly inside the rolling window: the count never under-states what the rolling window
--   holds, so nothing is ever admitted beyond the limit; a charge just leaves the count up to one
--   sub-window (window / N) late.
-- - `rl:burst` (tokens, at), `rl:leases` (a sorted set: one member per request in flight, scored by
--   its expiry), `rl:budget` (day, dt, month, mt, mc: the current UTC day's and month's charges).
--
-- One project's settlements and admissions of one event-loop turn, in one call: the requests that
-- ended are settled, then the new ones admitted in order, each seeing the writes of those before it,
-- exactly as one call each would at the same instant.
--
-- Two levels (DESIGN.md section 9): a key with limits of its own has the same five structures
-- (`kl:<key id>:window|burst|sub|leases|budget`, in the project's slot) and its limits in its record;
-- a request that names its key passes only if both levels admit it (the project's checked first),
-- and a refusal at either charges neither. A request without a key level costs no key-level work.
--
-- KEYS: project hash, window log, burst hash, sub-window hash, leases, budget hash, alert outbox, the
-- project's webhook thresholds; then, for each key level the call names (its `k`, 1-based), the key's
-- record, window log, burst hash, sub-window hash, leases and budget hash.
-- ARGV[1]: one JSON object (one argument to encode and to parse, where a hundred separate ones cost
-- the client more for each than one argument costs the script):
--   windowMs, subWindows, burstWindowMs, exactLogMax, leaseTtlMs: the admission settings;
--   defaultRequestsPerMinute, defaultBurstLimit: the policy of a project hash without one;
--   settlements: [{id, slot, rateTokens?, dayTokens?, monthTokens?, monthCost?, usedTokens, usedCost,
--     day, month, lease?}]: a reservation (a charge is absent when it was not made; lease is true
--     when the request holds one) and what the request really used;
--   fence: {replica, seq} when a settlement charges a budget: the batch's number in its replica's
--     stream. Its budget part is skipped when apply-usage.lua reconciled it from the usage records
--     already (`f<replica>:<seq>`, left there when it went unanswered); `q<replica>` keeps the
--     highest run, which tells apply-usage.lua that it ran;
--   settlements may carry k and key: {rateTokens?, dayTokens?, monthTokens?, monthCost?, day, month,
--     lease?}: the key level's charges (its budgets under the batch's fence, as apply-usage.lua corrects
--     a key's with its project's);
--   admissions: [{id, tokens, rate, cost, day, month, k?}]: what each request asks (`tokens` of the budgets,
--     `rate` of the token rate: less when its output part is capped).
--   projectId, keyIds (the key levels' ids, in `k` order), thresholds (the config webhooks' budget
--     fractions): for the budget alerts below.
--   lateAfter (optional): Redis's time after which the replica has surely given up waiting (its
--     command timeout, with the clock difference its replies bound); a batch run later (held in a hung
--     Redis's socket) admits nothing, as the replica admitted its requests by the fallback meanwhile.
-- Returns a JSON object: now (Redis's time, ms, in a string), late (true: the admissions were
-- skipped), outbox (the alert outbox's length, when a budget was settled), and nothing more without
-- admissions, else
--   slot: the sub-window the token charges went to (an integer in a string: exact at any size);
--   policy: the project's limits (requests_per_minute, burst_limit, tokens_per_minute,
--     max_concurrent_requests, daily_tokens, monthly_tokens, monthly_cost; the optional ones as the
--     hash holds them, strings, or null when unset);
--   decisions: one per admission, in order: {refusedBy (absent: admitted), remaining, resetMs,
--     burstRemaining, burstResetMs, tokensRemaining, tokensResetMs, inFlight, retryAfterMs,
--     chargedRate, chargedDay, chargedMonth, chargedCost (true when the admission charged the
--     request's tokens, or its cost, to that limit; absent when not), lease (true when a lease was
--     taken; absent when not), day, month (the budget periods charged), level ('project' or 'key'
--     when refused; refusedBy is then the project's, or absent and in key), key (a key level's own
--     decision, the same fields)};
--   keyPolicies: [{k, policy}] of the key levels admitted on (burst_limit as the record holds it);
--   priority: the project's queue priority, when its hash holds one.
-- cjson writes numbers with 14 significant digits: every number in the reply stays below 10^13.
--
-- Settling: each charge becomes the real usage where it still counts: in its sub-window while
-- that is in the window (else an excess is added to the current one), in its budget period while
-- that is current; the lease is released.
-- Budget alerts (DESIGN.md section 9): the budget hash also sums what settled in the period (`ds`, `ms`,
-- `cs`: real use, without the reservations of requests in flight). When a settlement takes one past
-- a threshold of its limit (the config's thresholds and the project's webhooks'), an event goes to the
-- project's outbox (its slot: the alert stream lives in another), which the replica moves to the
-- stream (redis-quota-store.ts). `ad`, `am`, `ac` keep the highest threshold told per period, so each
-- (subject, budget, period, threshold) is told once, whichever replica settles.
-- Admitting: a spent budget first, then the request rate (window, else burst), the token rate
-- and the concurrency cap; writes only when every check passes (a refusal costs nothing).
-- Each hash is read once and written once per call, whatever the number of requests it carries:
-- the counters live in locals in between (the script runs atomically, so no one sees them stale),
-- which keeps a busy project's Redis time per request to its lease's ZADD and ZREM.
local Q = cjson.decode(ARGV[1])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = Q.windowMs
local n = Q.subWindows
local sub = window / n
local cur = math.floor(now / sub)
local first = cur - n
local burstWindow = Q.burstWindowMs
local leaseTtl = Q.leaseTtlMs
local null = cjson.null
local function num(v) return tonumber(v) or 0 end
-- integers as Redis stores them (HINCRBY reads them back): no exponent, no fraction
local function int(v) return string.format('%d', v) end

-- One level's state (the project's, or a key's): its keys and the counters held in locals between
-- the reads and the single write at the end of the call.
-- Brings `rl:sub` up to the current sub-window: subtracts and deletes what left the window. The
-- current sub-window's counters (`rcur`, `tcur`) and the running sums are written once, by saveSub.
local function openLevel(record, log, burst, subKey, leases, budgetKey)
  local L = {record = record, log = log, burstKey = burst, sub = subKey, leases = leases, budgetKey = budgetKey,
    earlier = {}, released = {}, curChanged = false, budChanged = false}
  local meta = redis.call('HMGET', subKey, 'low', 'rs', 'ts', 'mode', 'since', 'r' .. cur, 't' .. cur)
  local low = tonumber(meta[1])
  L.rs, L.ts, L.rcur, L.tcur, L.mode, L.since = num(meta[2]), num(meta[3]), num(meta[6]), num(meta[7]), meta[4], meta[5]
  if low ~= nil and first - low > n then
    redis.call('DEL', subKey)
    L.rs, L.ts, L.mode, L.since, L.rcur, L.tcur = 0, 0, false, false, 0, 0
  elseif low ~= nil and low < first then
    for k = low, first - 1 do
      local v = redis.call('HMGET', subKey, 'r' .. k, 't' .. k)
      L.rs, L.ts = L.rs - num(v[1]), L.ts - num(v[2])
      redis.call('HDEL', subKey, 'r' .. k, 't' .. k)
    end
  end
  if L.rs < 0 then L.rs = 0 end
  if L.ts < 0 then L.ts = 0 end
  if low == nil or low < first then low = first end
  L.low = low
  return L
end
local function saveSub(L)
  if L.curChanged then
    redis.call('HSET', L.sub, 'low', L.low, 'rs', int(L.rs), 'ts', int(L.ts), 'r' .. cur, int(L.rcur), 't' .. cur, int(L.tcur))
  else
    redis.call('HSET', L.sub, 'low', L.low, 'rs', int(L.rs), 'ts', int(L.ts))
  end
  redis.call('PEXPIRE', L.sub, math.ceil(window + 2 * sub))
end
-- ms until the window's count of prefix (r or t) has dropped to at most target
local function drain(L, prefix, total, target)
  local acc = 0
  for k = L.low, cur do
    if k == cur then
      if prefix == 'r' then acc = acc + L.rcur else acc = acc + L.tcur end
    else
      acc = acc + num(redis.call('HGET', L.sub, prefix .. k))
    end
    if total - acc <= target then return math.max(1, math.ceil((k + n + 1) * sub - now)) end
  end
  return window
end
-- The budget hash, read at most once per call and written once at its end.
local function budget(L)
  if not L.bud then
    local v = redis.call('HMGET', L.budgetKey, 'day', 'dt', 'month', 'mt', 'mc', 'ds', 'ms', 'cs', 'ad', 'am', 'ac')
    L.bud = {day = v[1], dt = num(v[2]), month = v[3], mt = num(v[4]), mc = num(v[5]), ds = num(v[6]), ms = num(v[7]), cs = num(v[8]),
      ad = v[9], am = v[10], ac = v[11]}
  end
  return L.bud
end

-- A settlement's charges on one level: each becomes the real usage where it still counts.
local function settleOn(L, c, id, slot, usedTokens, usedCost, fenced)
  if c.rateTokens then
    local delta = usedTokens - c.rateTokens
    if slot == cur then
      local v = L.tcur + delta
      if v < 0 then delta, v = delta - v, 0 end
      L.tcur, L.curChanged = v, true
      L.ts = L.ts + delta
    elseif slot >= L.low then
      local v = (L.earlier[slot] or num(redis.call('HGET', L.sub, 't' .. slot))) + delta
      if v < 0 then delta, v = delta - v, 0 end
      L.earlier[slot] = v
      L.ts = L.ts + delta
    elseif delta > 0 then
      L.tcur, L.curChanged = L.tcur + delta, true
      L.ts = L.ts + delta
    end
    if L.ts < 0 then L.ts = 0 end
  end
  if not fenced and (c.dayTokens or c.monthTokens or c.monthCost) then
    local g = budget(L)
    if c.dayTokens and g.day == c.day then g.dt, g.ds, L.budChanged = g.dt + usedTokens - c.dayTokens, g.ds + usedTokens, true end
    if c.monthTokens and g.month == c.month then g.mt, g.ms, L.budChanged = g.mt + usedTokens - c.monthTokens, g.ms + usedTokens, true end
    if c.monthCost and g.month == c.month then g.mc, g.cs, L.budChanged = g.mc + usedCost - c.monthCost, g.cs + usedCost, true end
    L.budSettled = L.budSettled or L.budChanged
  end
  if c.lease then L.released[#L.released + 1] = id end
end

-- The levels: the project's (always), and the keys with limits this batch names (KEYS 7.., six each).
local project = openLevel(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
local OUTBOX, OWN_THRESHOLDS = KEYS[7], KEYS[8]
local keyLevels = {}
local function keyLevel(k)
  if not keyLevels[k] then
    local b = 8 + (k - 1) * 6
    keyLevels[k] = openLevel(KEYS[b + 1], KEYS[b + 2], KEYS[b + 3], KEYS[b + 4], KEYS[b + 5], KEYS[b + 6])
  end
  return keyLevels[k]
end

local fenced = false
if Q.fence then
  local fence = 'f' .. Q.fence.replica .. ':' .. int(Q.fence.seq)
  local marks = redis.call('HMGET', project.budgetKey, 'q' .. Q.fence.replica, fence)
  if marks[2] then
    fenced = true
    redis.call('HDEL', project.budgetKey, fence)
  end
  if not (marks[1] and tonumber(string.match(marks[1], '^(%d+)')) >= Q.fence.seq) then
    redis.call('HSET', project.budgetKey, 'q' .. Q.fence.replica, int(Q.fence.seq) .. ':' .. int(now))
    redis.call('PEXPIRE', project.budgetKey, 32 * 86400000)
  end
end
for _, settled in ipairs(Q.settlements) do
  settleOn(project, settled, settled.id, settled.slot, settled.usedTokens, settled.usedCost, fenced)
  if settled.k then settleOn(keyLevel(settled.k), settled.key, settled.id, settled.slot, settled.usedTokens, settled.usedCost, fenced) end
end
-- the settled leases and earlier sub-windows are written before the admissions read them
local function release(L)
  if #L.released > 0 then redis.call('ZREM', L.leases, unpack(L.released)) end
  for slot, v in pairs(L.earlier) do redis.call('HSET', L.sub, 't' .. slot, int(v)) end
end
release(project)
for _, L in pairs(keyLevels) do release(L) end

-- The thresholds told of: the config's and the project's webhooks' (read once, sorted).
local thresholdList
local function thresholds()
  if not thresholdList then
    local seen, list = {}, {}
    local function add(t)
      if t and t > 0 and not seen[t] then seen[t], list[#list + 1] = true, t end
    end
    for _, t in ipairs(Q.thresholds or {}) do add(t) end
    local own = redis.call('GET', OWN_THRESHOLDS)
    if own then for v in string.gmatch(own, '[^,]+') do add(tonumber(v)) end end
    table.sort(list)
    thresholdList = list
  end
  return thresholdList
end
-- each budget: its settled sum, its period, its told mark, and its limit's field in the record
local BUDGETS = {
  {used = 'ds', period = 'day', mark = 'ad', name = 'daily_tokens'},
  {used = 'ms', period = 'month', mark = 'am', name = 'monthly_tokens'},
  {used = 'cs', period = 'month', mark = 'ac', name = 'monthly_cost'},
}
-- A level's crossings of this call's settlements: one outbox entry per threshold passed.
local function detectCrossings(L, keyId)
  if not L.budSettled or #thresholds() == 0 then return end
  local limits = redis.call('HMGET', L.record, 'daily_tokens', 'monthly_tokens', 'monthly_cost')
  local g = L.bud
  for i, b in ipairs(BUDGETS) do
    local limit, period = tonumber(limits[i]), g[b.period]
    if limit and limit > 0 and period then
      local high, used = 0, g[b.used]
      local told, at = string.match(g[b.mark] or '', '^([^|]*)|(.*)$')
      if told == period then high = tonumber(at) or 0 end
      local top = high
      for _, t in ipairs(thresholds()) do
        -- a hair under the product: 0.8 * 1000 must count 800 as reached
        if t > high and used >= t * limit * (1 - 1e-12) then
          top = t
          local name = table.concat({Q.projectId, keyId or '', b.name, period, tostring(t)}, '|')
          redis.call('RPUSH', OUTBOX, cjson.encode({
            id = 'evt_' .. string.sub(redis.sha1hex(name), 1, 24), at = now, api_key_id = keyId or null,
            budget = b.name, period = period, threshold = t, used = used, limit = limit,
          }))
        end
      end
      if top > high then g[b.mark], L.budChanged = period .. '|' .. tostring(top), true end
    end
  end
end
detectCrossings(project, nil)
for k, L in pairs(keyLevels) do detectCrossings(L, Q.keyIds[k]) end

-- A level's limits for this call's admissions, and its state as of now (one read each).
local function prepare(L, p, rpmDefault, burstDefault)
  L.rpm = tonumber(p[1]) or rpmDefault
  L.burst = tonumber(p[2]) or burstDefault
  L.tpm, L.maxc, L.daily, L.monthly, L.mcost = tonumber(p[3]), tonumber(p[4]), tonumber(p[5]), tonumber(p[6]), tonumber(p[7])
  L.p = p
  if L.rpm then
    -- request rate: the exact log for small policies, the sub-window counters for large ones
    L.logMode = L.rpm <= Q.exactLogMax
    if L.logMode then
      redis.call('ZREMRANGEBYSCORE', L.log, '-inf', now - window)
      if L.mode == 'sub' then
        L.since = now
        redis.call('HSET', L.sub, 'mode', 'log', 'since', now)
      elseif not L.mode then
        redis.call('HSET', L.sub, 'mode', 'log')
      end
    elseif L.mode ~= 'sub' then
      redis.call('HSET', L.sub, 'mode', 'sub')
    end
    -- the burst bucket as of now (one read; written back once if spent)
    local state = redis.call('HMGET', L.burstKey, 'tokens', 'at')
    L.btok = L.burst
    if state[1] then L.btok = math.min(L.burst, tonumber(state[1]) + (now - tonumber(state[2])) * L.burst / burstWindow) end
  end
  L.burstSpent, L.held, L.leased = false, 0, {}
  if L.maxc then
    redis.call('ZREMRANGEBYSCORE', L.leases, '-inf', now)
    L.held = redis.call('ZCARD', L.leases)
  end
end

-- Whether a level admits a request: its spent budget first, then the request rate (window, else
-- burst), the token rate and the concurrency cap. Writes nothing.
local function check(L, asked)
  local c = {refused = '', dt = 0, mt = 0, mc = 0, dayFresh = true, monthFresh = true}
  if L.daily or L.monthly or L.mcost then
    local g = budget(L)
    c.g = g
    if g.day and g.day >= asked.day then c.dayFresh, c.dt = false, g.dt end
    if g.month and g.month >= asked.month then c.monthFresh, c.mt, c.mc = false, g.mt, g.mc end
    if L.daily and (c.dt >= L.daily or c.dt + asked.tokens > L.daily) then c.refused = 'daily_tokens'
    elseif L.monthly and (c.mt >= L.monthly or c.mt + asked.tokens > L.monthly) then c.refused = 'monthly_tokens'
    elseif L.mcost and (c.mc >= L.mcost or c.mc + asked.cost > L.mcost) then c.refused = 'monthly_cost' end
  end
  local used = 0
  if L.rpm then
    if L.logMode then
      used = redis.call('ZCARD', L.log)
      -- just switched from counters: the log does not hold the window yet, the counters do
      if L.since and now - tonumber(L.since) < window and L.rs > used then used = L.rs end
    else
      used = L.rs
    end
    c.useWindow = used < L.rpm
    if c.refused == '' and not c.useWindow and L.btok < 1 then c.refused = 'requests' end
  end
  c.used = used
  if c.refused == '' and L.tpm and L.ts + asked.rate > L.tpm then c.refused = 'tokens' end
  c.inflight = L.held
  if c.refused == '' and L.maxc and c.inflight >= L.maxc then c.refused = 'concurrency' end
  return c
end

-- Charges an admitted request to a level; returns what it took.
local function commit(L, asked, c)
  local d = {}
  if L.rpm then
    if c.useWindow then
      if L.logMode then
        redis.call('ZADD', L.log, now, asked.id)
        redis.call('PEXPIRE', L.log, window)
      end
      L.rcur, L.curChanged = L.rcur + 1, true
      L.rs, c.used = L.rs + 1, c.used + 1
    else
      L.btok, L.burstSpent = L.btok - 1, true
    end
  end
  if L.tpm then
    L.tcur, L.curChanged = L.tcur + asked.rate, true
    L.ts, d.chargedRate = L.ts + asked.rate, true
  end
  if L.maxc then
    L.leased[#L.leased + 1] = now + leaseTtl
    L.leased[#L.leased + 1] = asked.id
    L.held = L.held + 1
    c.inflight, d.lease = L.held, true
  end
  local g = c.g
  if g then
    if c.dayFresh then g.day, g.dt, g.ds = asked.day, 0, 0 end
    if c.monthFresh then g.month, g.mt, g.mc, g.ms, g.cs = asked.month, 0, 0, 0, 0 end
    if L.daily then g.dt = g.dt + asked.tokens; d.chargedDay = true end
    if L.monthly then g.mt = g.mt + asked.tokens; d.chargedMonth = true end
    if L.mcost then g.mc = g.mc + asked.cost; d.chargedCost = true end
    L.budChanged = true
  end
  return d
end

-- A level's figures after the decision (d: what commit took, or {}), with the retry time of its refusal.
local function figures(L, asked, c, d)
  local retry, refused = 0, c.refused
  if refused == 'requests' then
    local used = c.used
    if L.logMode and used >= L.rpm and used == redis.call('ZCARD', L.log) then
      local entry = redis.call('ZRANGE', L.log, used - L.rpm, used - L.rpm, 'WITHSCORES')
      retry = tonumber(entry[2]) + window - now
    else
      retry = drain(L, 'r', L.rs, L.rpm - 1)
    end
    if L.burst > 0 then retry = math.min(retry, math.ceil((1 - L.btok) * burstWindow / L.burst)) end
  elseif refused == 'tokens' then
    if asked.rate > L.tpm then retry = window else retry = drain(L, 't', L.ts, L.tpm - asked.rate) end
  elseif refused == 'concurrency' then
    retry = 1000
  end
  local resetMs, burstReset, remaining, burstRemaining = 0, 0, 0, 0
  if L.rpm then
    if c.used > 0 then
      if L.logMode and redis.call('EXISTS', L.log) == 1 then
        local newest = redis.call('ZRANGE', L.log, -1, -1, 'WITHSCORES')
        resetMs = tonumber(newest[2]) + window - now
      else
        resetMs = math.ceil((cur + n + 1) * sub - now)
      end
    end
    if L.burst > 0 and L.btok < L.burst then burstReset = math.ceil((L.burst - L.btok) * burstWindow / L.burst) end
    remaining, burstRemaining = math.max(0, L.rpm - c.used), math.floor(L.btok + 1e-9)
  end
  local tokensReset = 0
  if L.ts > 0 then tokensReset = math.ceil((cur + n + 1) * sub - now) end
  -- the periods charged: the stored ones when they are newer than the request's (another replica's clock)
  local periodDay, periodMonth = asked.day, asked.month
  if d.chargedDay or d.chargedMonth or d.chargedCost then periodDay, periodMonth = c.g.day or asked.day, c.g.month or asked.month end
  return {
    refusedBy = refused ~= '' and refused or nil,
    remaining = remaining, resetMs = resetMs,
    burstRemaining = burstRemaining, burstResetMs = burstReset,
    tokensRemaining = math.max(0, (L.tpm or 0) - L.ts), tokensResetMs = tokensReset,
    inFlight = c.inflight, retryAfterMs = math.max(0, math.ceil(retry)),
    chargedRate = d.chargedRate, chargedDay = d.chargedDay, chargedMonth = d.chargedMonth, chargedCost = d.chargedCost,
    lease = d.lease, day = periodDay, month = periodMonth,
  }
end

-- the optional limits as the hash holds them (exact at any size; '' or missing: none)
local function policyOf(L)
  local p = L.p
  -- a key's burst_limit as its record holds it (none: null), a project's with its default
  local burstShown = L.burst
  if L ~= project then burstShown = tonumber(p[2]) or null end
  return {
    requests_per_minute = L.rpm or null, burst_limit = burstShown,
    tokens_per_minute = L.tpm and p[3] or null, max_concurrent_requests = L.maxc and p[4] or null,
    daily_tokens = L.daily and p[5] or null, monthly_tokens = L.monthly and p[6] or null, monthly_cost = L.mcost and p[7] or null,
  }
end

local POLICY = {'requests_per_minute', 'burst_limit', 'tokens_per_minute', 'max_concurrent_requests', 'daily_tokens', 'monthly_tokens', 'monthly_cost'}
local POLICY_AND_PRIORITY = {'requests_per_minute', 'burst_limit', 'tokens_per_minute', 'max_concurrent_requests', 'daily_tokens', 'monthly_tokens', 'monthly_cost', 'priority'}
local reply = {now = int(now)}
if Q.lateAfter and now > Q.lateAfter and #Q.admissions > 0 then
  reply.late = true
elseif #Q.admissions > 0 then
  local decisions = {}
  -- the policy, then the project's queue priority (read here: no other call on the request path)
  local projectFields = redis.call('HMGET', project.record, unpack(POLICY_AND_PRIORITY))
  if projectFields[8] and projectFields[8] ~= '' then reply.priority = projectFields[8] end
  prepare(project, projectFields, Q.defaultRequestsPerMinute, Q.defaultBurstLimit)
  -- a key's limits from its record (read now: a PATCH applies to the next request); a key without
  -- a request rate has no burst either
  local prepared = {}
  for _, asked in ipairs(Q.admissions) do
    if asked.k and not prepared[asked.k] then
      prepared[asked.k] = true
      local L = keyLevel(asked.k)
      local p = redis.call('HMGET', L.record, unpack(POLICY))
      prepare(L, p, nil, tonumber(p[1]) and 0 or nil)
    end
  end

  for _, asked in ipairs(Q.admissions) do
    -- both levels admit it, or nothing is charged at either: the project's checks first
    local c = check(project, asked)
    local K, kc = nil, nil
    if asked.k then
      K = keyLevel(asked.k)
      kc = check(K, asked)
    end
    local d, kd, level = {}, {}, nil
    if c.refused ~= '' then level = 'project'
    elseif kc and kc.refused ~= '' then level = 'key' end
    if not level then
      d = commit(project, asked, c)
      if K then kd = commit(K, asked, kc) end
    end
    local decision = figures(project, asked, c, d)
    if level == 'key' then decision.refusedBy = nil end
    decision.level = level
    if K then
      if level == 'project' then kc.refused = '' end
      decision.key = figures(K, asked, kc, kd)
      if level == 'key' then decision.retryAfterMs = decision.key.retryAfterMs end
    end
    decisions[#decisions + 1] = decision
  end
  local function finish(L)
    if L.burstSpent then
      redis.call('HSET', L.burstKey, 'tokens', string.format('%.17g', L.btok), 'at', now)
      redis.call('PEXPIRE', L.burstKey, burstWindow)
    end
    if #L.leased > 0 then
      redis.call('ZADD', L.leases, unpack(L.leased))
      redis.call('PEXPIRE', L.leases, leaseTtl + 1000)
    end
  end
  finish(project)
  local keyPolicies = {}
  for k in pairs(prepared) do
    finish(keyLevels[k])
    keyPolicies[#keyPolicies + 1] = {k = k, policy = policyOf(keyLevels[k])}
  end
  reply.slot = int(cur)
  reply.policy = policyOf(project)
  if #keyPolicies > 0 then reply.keyPolicies = keyPolicies end
  reply.decisions = decisions
end

local function close(L)
  if L.budChanged then
    local bud, fields = L.bud, {}
    if bud.day then
      for _, v in ipairs({'day', bud.day, 'dt', int(bud.dt), 'ds', int(bud.ds)}) do fields[#fields + 1] = v end
    end
    if bud.month then
      for _, v in ipairs({'month', bud.month, 'mt', int(bud.mt), 'mc', string.format('%.17g', bud.mc), 'ms', int(bud.ms), 'cs', string.format('%.17g', bud.cs)}) do
        fields[#fields + 1] = v
      end
    end
    for _, mark in ipairs({'ad', 'am', 'ac'}) do
      if bud[mark] then fields[#fields + 1], fields[#fields + 2] = mark, bud[mark] end
    end
    redis.call('HSET', L.budgetKey, unpack(fields))
    redis.call('PEXPIRE', L.budgetKey, 32 * 86400000)
  end
  saveSub(L)
end
close(project)
for _, L in pairs(keyLevels) do close(L) end
local settledBudget = project.budSettled
for _, L in pairs(keyLevels) do settledBudget = settledBudget or L.budSettled end
if settledBudget then reply.outbox = redis.call('LLEN', OUTBOX) end
return cjson.encode(reply)
