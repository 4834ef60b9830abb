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
-- KEYS: project hash, window log, burst hash, sub-window hash, leases, budget hash.
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
--   admissions: [{id, tokens, rate, cost, day, month}]: what each request asks (`tokens` of the budgets,
--     `rate` of the token rate: less when its output part is capped).
--   lateAfter (optional): Redis's time after which the replica has surely given up waiting (its
--     command timeout, with the clock difference its replies bound); a batch run later (held in a hung
--     Redis's socket) admits nothing, as the replica admitted its requests by the fallback meanwhile.
-- Returns a JSON object: now (Redis's time, ms, in a string), late (true: the admissions were
-- skipped), and nothing more without admissions, else
--   slot: the sub-window the token charges went to (an integer in a string: exact at any size);
--   policy: the project's limits (requests_per_minute, burst_limit, tokens_per_minute,
--     max_concurrent_requests, daily_tokens, monthly_tokens, monthly_cost; the optional ones as the
--     hash holds them, strings, or null when unset);
--   decisions: one per admission, in order: {refusedBy (absent: admitted), remaining, resetMs,
--     burstRemaining, burstResetMs, tokensRemaining, tokensResetMs, inFlight, retryAfterMs,
--     chargedRate, chargedDay, chargedMonth, chargedCost (true when the admission charged the
--     request's tokens, or its cost, to that limit; absent when not), lease (true when a lease was
--     taken; absent when not), day, month (the budget periods charged)}.
-- cjson writes numbers with 14 significant digits: every number in the reply stays below 10^13.
--
-- Settling: each charge becomes the real usage where it still counts: in its sub-window while
-- that is in the window (else an excess is added to the current one), in its budget period while
-- that is current; the lease is released.
-- Admitting: a spent budget first, then the request rate (window, else burst), the token rate
-- and the concurrency cap; writes only when every check passes (a refusal costs nothing).
-- Each hash is read once and written once per call, whatever the number of requests it carries:
-- the counters live in locals in between (the script runs atomically, so no one sees them stale),
-- which keeps a busy project's Redis time per request to its lease's ZADD and ZREM.
local PROJECT, LOG, BURST, SUB, LEASES, BUDGET = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local Q = cjson.decode(ARGV[1])

-- Brings `rl:sub` (SUB) up to the current sub-window: subtracts and deletes what left the window.
-- The current sub-window's counters (`rcur`, `tcur`) and the running sums are held in locals and
-- written once, by saveSub, at the end of the call.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = Q.windowMs
local n = Q.subWindows
local sub = window / n
local cur = math.floor(now / sub)
local first = cur - n
local function num(v) return tonumber(v) or 0 end
-- integers as Redis stores them (HINCRBY reads them back): no exponent, no fraction
local function int(v) return string.format('%d', v) end
local meta = redis.call('HMGET', SUB, 'low', 'rs', 'ts', 'mode', 'since', 'r' .. cur, 't' .. cur)
local low = tonumber(meta[1])
local rs, ts = num(meta[2]), num(meta[3])
local rcur, tcur, curChanged = num(meta[6]), num(meta[7]), false
if low ~= nil and first - low > n then
  redis.call('DEL', SUB)
  rs, ts, meta[4], meta[5], rcur, tcur = 0, 0, false, false, 0, 0
elseif low ~= nil and low < first then
  for k = low, first - 1 do
    local v = redis.call('HMGET', SUB, 'r' .. k, 't' .. k)
    rs, ts = rs - num(v[1]), ts - num(v[2])
    redis.call('HDEL', SUB, 'r' .. k, 't' .. k)
  end
end
if rs < 0 then rs = 0 end
if ts < 0 then ts = 0 end
if low == nil or low < first then low = first end
local function saveSub()
  if curChanged then
    redis.call('HSET', SUB, 'low', low, 'rs', int(rs), 'ts', int(ts), 'r' .. cur, int(rcur), 't' .. cur, int(tcur))
  else
    redis.call('HSET', SUB, 'low', low, 'rs', int(rs), 'ts', int(ts))
  end
  redis.call('PEXPIRE', SUB, math.ceil(window + 2 * sub))
end
-- ms until the window's count of prefix (r or t) has dropped to at most target
local function drain(prefix, total, target)
  local acc = 0
  for k = low, cur do
    if k == cur then
      if prefix == 'r' then acc = acc + rcur else acc = acc + tcur end
    else
      acc = acc + num(redis.call('HGET', SUB, prefix .. k))
    end
    if total - acc <= target then return math.max(1, math.ceil((k + n + 1) * sub - now)) end
  end
  return window
end
local burstWindow = Q.burstWindowMs
local leaseTtl = Q.leaseTtlMs

-- The budget hash, read at most once per call and written once at its end.
local bud, budChanged = nil, false
local function budget()
  if not bud then
    local v = redis.call('HMGET', BUDGET, 'day', 'dt', 'month', 'mt', 'mc')
    bud = {day = v[1], dt = num(v[2]), month = v[3], mt = num(v[4]), mc = num(v[5])}
  end
  return bud
end

-- earlier sub-windows' token counts that settlements correct: each read and written once
local earlier, released = {}, {}
local fenced = false
if Q.fence then
  local fence = 'f' .. Q.fence.replica .. ':' .. int(Q.fence.seq)
  local marks = redis.call('HMGET', BUDGET, 'q' .. Q.fence.replica, fence)
  if marks[2] then
    fenced = true
    redis.call('HDEL', BUDGET, fence)
  end
  if not (marks[1] and tonumber(string.match(marks[1], '^(%d+)')) >= Q.fence.seq) then
    redis.call('HSET', BUDGET, 'q' .. Q.fence.replica, int(Q.fence.seq) .. ':' .. int(now))
    redis.call('PEXPIRE', BUDGET, 32 * 86400000)
  end
end
for _, settled in ipairs(Q.settlements) do
  local slot, rateTokens, dayTokens, monthTokens, monthCost = settled.slot, settled.rateTokens, settled.dayTokens, settled.monthTokens, settled.monthCost
  local usedTokens, usedCost = settled.usedTokens, settled.usedCost
  if rateTokens then
    local delta = usedTokens - rateTokens
    if slot == cur then
      local v = tcur + delta
      if v < 0 then delta, v = delta - v, 0 end
      tcur, curChanged = v, true
      ts = ts + delta
    elseif slot >= low then
      local v = (earlier[slot] or num(redis.call('HGET', SUB, 't' .. slot))) + delta
      if v < 0 then delta, v = delta - v, 0 end
      earlier[slot] = v
      ts = ts + delta
    elseif delta > 0 then
      tcur, curChanged = tcur + delta, true
      ts = ts + delta
    end
    if ts < 0 then ts = 0 end
  end
  if not fenced and (dayTokens or monthTokens or monthCost) then
    local g = budget()
    if dayTokens and g.day == settled.day then g.dt, budChanged = g.dt + usedTokens - dayTokens, true end
    if monthTokens and g.month == settled.month then g.mt, budChanged = g.mt + usedTokens - monthTokens, true end
    if monthCost and g.month == settled.month then g.mc, budChanged = g.mc + usedCost - monthCost, true end
  end
  if settled.lease then released[#released + 1] = settled.id end
end
if #released > 0 then redis.call('ZREM', LEASES, unpack(released)) end
for slot, v in pairs(earlier) do redis.call('HSET', SUB, 't' .. slot, int(v)) end

local reply = {now = int(now)}
if Q.lateAfter and now > Q.lateAfter and #Q.admissions > 0 then
  reply.late = true
elseif #Q.admissions > 0 then
  local decisions = {}
  local p = redis.call('HMGET', PROJECT, 'requests_per_minute', 'burst_limit', 'tokens_per_minute', 'max_concurrent_requests', 'daily_tokens', 'monthly_tokens', 'monthly_cost')
  local rpm = tonumber(p[1]) or Q.defaultRequestsPerMinute
  local burst = tonumber(p[2]) or Q.defaultBurstLimit
  local tpm, maxc, daily, monthly, mcost = tonumber(p[3]), tonumber(p[4]), tonumber(p[5]), tonumber(p[6]), tonumber(p[7])
  -- request rate: the exact log for small policies, the sub-window counters for large ones
  local logMode = rpm <= Q.exactLogMax
  if logMode then
    redis.call('ZREMRANGEBYSCORE', LOG, '-inf', now - window)
    if meta[4] == 'sub' then
      meta[5] = now
      redis.call('HSET', SUB, 'mode', 'log', 'since', now)
    elseif not meta[4] then
      redis.call('HSET', SUB, 'mode', 'log')
    end
  elseif meta[4] ~= 'sub' then
    redis.call('HSET', SUB, 'mode', 'sub')
  end
  -- the burst bucket as of now (one read; written back once if spent), the leases in flight
  local state = redis.call('HMGET', BURST, 'tokens', 'at')
  local btok = burst
  if state[1] then btok = math.min(burst, tonumber(state[1]) + (now - tonumber(state[2])) * burst / burstWindow) end
  local burstSpent = false
  local held, leased = 0, {}
  if maxc then
    redis.call('ZREMRANGEBYSCORE', LEASES, '-inf', now)
    held = redis.call('ZCARD', LEASES)
  end

  for _, asked in ipairs(Q.admissions) do
    local id, est, rate, cost, day, month = asked.id, asked.tokens, asked.rate, asked.cost, asked.day, asked.month
    local refused = ''
    -- budgets of the current UTC periods (a replica still in the previous period charges the newer one)
    local g, dt, mt, mc, dayFresh, monthFresh = nil, 0, 0, 0, true, true
    if daily or monthly or mcost then
      g = budget()
      if g.day and g.day >= day then dayFresh, dt = false, g.dt end
      if g.month and g.month >= month then monthFresh, mt, mc = false, g.mt, g.mc end
      if daily and (dt >= daily or dt + est > daily) then refused = 'daily_tokens'
      elseif monthly and (mt >= monthly or mt + est > monthly) then refused = 'monthly_tokens'
      elseif mcost and (mc >= mcost or mc + cost > mcost) then refused = 'monthly_cost' end
    end

    local used
    if logMode then
      used = redis.call('ZCARD', LOG)
      -- just switched from counters: the log does not hold the window yet, the counters do
      if meta[5] and now - tonumber(meta[5]) < window and rs > used then used = rs end
    else
      used = rs
    end
    local useWindow = used < rpm
    if refused == '' and not useWindow and btok < 1 then refused = 'requests' end
    if refused == '' and tpm and ts + rate > tpm then refused = 'tokens' end
    local inflight = held
    if refused == '' and maxc and inflight >= maxc then refused = 'concurrency' end

    -- what the admission took (nil: not taken, left out of the reply)
    local retry, chargedRate, chargedDay, chargedMonth, chargedCost, lease = 0, nil, nil, nil, nil, nil
    if refused == '' then
      if useWindow then
        if logMode then
          redis.call('ZADD', LOG, now, id)
          redis.call('PEXPIRE', LOG, window)
        end
        rcur, curChanged = rcur + 1, true
        rs, used = rs + 1, used + 1
      else
        btok, burstSpent = btok - 1, true
      end
      if tpm then
        tcur, curChanged = tcur + rate, true
        ts, chargedRate = ts + rate, true
      end
      if maxc then
        leased[#leased + 1] = now + leaseTtl
        leased[#leased + 1] = id
        held = held + 1
        inflight, lease = held, true
      end
      if g then
        if dayFresh then g.day, g.dt = day, 0 end
        if monthFresh then g.month, g.mt, g.mc = month, 0, 0 end
        if daily then g.dt = g.dt + est; chargedDay = true end
        if monthly then g.mt = g.mt + est; chargedMonth = true end
        if mcost then g.mc = g.mc + cost; chargedCost = true end
        budChanged = true
      end
    elseif refused == 'requests' then
      if logMode and used >= rpm and used == redis.call('ZCARD', LOG) then
        local entry = redis.call('ZRANGE', LOG, used - rpm, used - rpm, 'WITHSCORES')
        retry = tonumber(entry[2]) + window - now
      else
        retry = drain('r', rs, rpm - 1)
      end
      if burst > 0 then retry = math.min(retry, math.ceil((1 - btok) * burstWindow / burst)) end
    elseif refused == 'tokens' then
      if rate > tpm then retry = window else retry = drain('t', ts, tpm - rate) end
    elseif refused == 'concurrency' then
      retry = 1000
    end

    local resetMs = 0
    if used > 0 then
      if logMode and redis.call('EXISTS', LOG) == 1 then
        local newest = redis.call('ZRANGE', LOG, -1, -1, 'WITHSCORES')
        resetMs = tonumber(newest[2]) + window - now
      else
        resetMs = math.ceil((cur + n + 1) * sub - now)
      end
    end
    local tokensReset = 0
    if ts > 0 then tokensReset = math.ceil((cur + n + 1) * sub - now) end
    local burstReset = 0
    if burst > 0 and btok < burst then burstReset = math.ceil((burst - btok) * burstWindow / burst) end
    -- the periods charged: the stored ones when they are newer than the request's (another replica's clock)
    local periodDay, periodMonth = day, month
    if refused == '' and g then periodDay, periodMonth = g.day or day, g.month or month end
    decisions[#decisions + 1] = {
      refusedBy = refused ~= '' and refused or nil,
      remaining = math.max(0, rpm - used), resetMs = resetMs,
      burstRemaining = math.floor(btok + 1e-9), burstResetMs = burstReset,
      tokensRemaining = math.max(0, (tpm or 0) - ts), tokensResetMs = tokensReset,
      inFlight = inflight, retryAfterMs = math.max(0, math.ceil(retry)),
      chargedRate = chargedRate, chargedDay = chargedDay, chargedMonth = chargedMonth, chargedCost = chargedCost,
      lease = lease, day = periodDay, month = periodMonth,
    }
  end
  if burstSpent then
    redis.call('HSET', BURST, 'tokens', string.format('%.17g', btok), 'at', now)
    redis.call('PEXPIRE', BURST, burstWindow)
  end
  if #leased > 0 then
    redis.call('ZADD', LEASES, unpack(leased))
    redis.call('PEXPIRE', LEASES, leaseTtl + 1000)
  end
  -- the optional limits as the hash holds them (exact at any size; '' or missing: none)
  local null = cjson.null
  reply.slot = int(cur)
  reply.policy = {
    requests_per_minute = rpm, burst_limit = burst,
    tokens_per_minute = tpm and p[3] or null, max_concurrent_requests = maxc and p[4] or null,
    daily_tokens = daily and p[5] or null, monthly_tokens = monthly and p[6] or null, monthly_cost = mcost and p[7] or null,
  }
  reply.decisions = decisions
end
if budChanged then
  local fields = {}
  if bud.day then
    for _, v in ipairs({'day', bud.day, 'dt', int(bud.dt)}) do fields[#fields + 1] = v end
  end
  if bud.month then
    for _, v in ipairs({'month', bud.month, 'mt', int(bud.mt), 'mc', string.format('%.17g', bud.mc)}) do fields[#fields + 1] = v end
  end
  redis.call('HSET', BUDGET, unpack(fields))
  redis.call('PEXPIRE', BUDGET, 32 * 86400000)
end
saveSub()
return cjson.encode(reply)
