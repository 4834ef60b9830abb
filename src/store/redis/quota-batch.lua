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
-- One project's admission work of one event-loop turn, in one call: the requests that ended
-- are settled, then the new ones admitted in order, each seeing the writes of those before it,
-- exactly as one call each would at the same instant.
--
-- KEYS: project hash, window log, burst hash, sub-window hash, leases, budget hash.
-- ARGV: one JSON array A (one argument to encode and to parse, where a hundred separate ones cost
-- the client more for each than the array costs the script): window ms, sub-windows N, burst window ms, exact-log maximum, lease TTL ms, default rpm,
-- default burst, number of settlements S; then S settlements (SETTLE_FIELDS values each: slot,
-- rate tokens charged (-1: none), day tokens charged, month tokens charged, cost charged (-1:
-- none), tokens used, cost used, day, month, request id, lease taken (1/0)); then the admissions
-- (ADMIT_FIELDS values each: request id, tokens to reserve, cost to reserve, day, month).
--
-- Settling: each charge becomes the real usage where it still counts: in its sub-window while
-- that is in the window (else an excess is added to the current one), in its budget period while
-- that is current; the lease is released.
-- Admitting: a spent budget first, then the request rate (window, else burst), the token rate
-- and the concurrency cap; writes only when every check passes (a refusal costs nothing).
-- Each hash is read once and written once per call, whatever the number of requests it carries:
-- the counters live in locals in between (the script runs atomically, so no one sees them stale),
-- which keeps a busy project's Redis time per request to its lease's ZADD and ZREM.
-- Returns 24 values per admission (see redis-quota-store.ts).
-- SETTLE_FIELDS and ADMIT_FIELDS: set before this by the caller.
local A = cjson.decode(ARGV[1])
local SUB = KEYS[4]

-- Brings `rl:sub` (SUB) up to the current sub-window: subtracts and deletes what left the window.
-- The current sub-window's counters (`rcur`, `tcur`) and the running sums are held in locals and
-- written once, by saveSub, at the end of the call.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(A[1])
local n = tonumber(A[2])
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
local burstWindow = tonumber(A[3])
local leaseTtl = tonumber(A[5])
local admissionsFrom = 9 + tonumber(A[8]) * SETTLE_FIELDS

-- The budget hash, read at most once per call and written once at its end.
local bud, budChanged = nil, false
local function budget()
  if not bud then
    local v = redis.call('HMGET', KEYS[6], 'day', 'dt', 'month', 'mt', 'mc')
    bud = {day = v[1], dt = num(v[2]), month = v[3], mt = num(v[4]), mc = num(v[5])}
  end
  return bud
end

-- earlier sub-windows' token counts that settlements correct: each read and written once
local earlier, released = {}, {}
for o = 9, admissionsFrom - 1, SETTLE_FIELDS do
  local slot, rateTokens, dayTokens, monthTokens, costCharged = tonumber(A[o]), tonumber(A[o + 1]), tonumber(A[o + 2]), tonumber(A[o + 3]), tonumber(A[o + 4])
  local usedTokens, usedCost = tonumber(A[o + 5]), tonumber(A[o + 6])
  if rateTokens >= 0 then
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
  if dayTokens >= 0 or monthTokens >= 0 or costCharged >= 0 then
    local g = budget()
    if dayTokens >= 0 and g.day == A[o + 7] then g.dt, budChanged = g.dt + usedTokens - dayTokens, true end
    if monthTokens >= 0 and g.month == A[o + 8] then g.mt, budChanged = g.mt + usedTokens - monthTokens, true end
    if costCharged >= 0 and g.month == A[o + 8] then g.mc, budChanged = g.mc + usedCost - costCharged, true end
  end
  if A[o + 10] == 1 then released[#released + 1] = A[o + 9] end
end
if #released > 0 then redis.call('ZREM', KEYS[5], unpack(released)) end
for slot, v in pairs(earlier) do redis.call('HSET', SUB, 't' .. slot, int(v)) end

local out = {}
if admissionsFrom <= #A then
  local p = redis.call('HMGET', KEYS[1], 'requests_per_minute', 'burst_limit', 'tokens_per_minute', 'max_concurrent_requests', 'daily_tokens', 'monthly_tokens', 'monthly_cost')
  local rpm = tonumber(p[1]) or tonumber(A[6])
  local burst = tonumber(p[2]) or tonumber(A[7])
  local tpm, maxc, daily, monthly, mcost = tonumber(p[3]), tonumber(p[4]), tonumber(p[5]), tonumber(p[6]), tonumber(p[7])
  -- request rate: the exact log for small policies, the sub-window counters for large ones
  local logMode = rpm <= tonumber(A[4])
  if logMode then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
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
  local state = redis.call('HMGET', KEYS[3], 'tokens', 'at')
  local btok = burst
  if state[1] then btok = math.min(burst, tonumber(state[1]) + (now - tonumber(state[2])) * burst / burstWindow) end
  local burstSpent = false
  local held, leased = 0, {}
  if maxc then
    redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
    held = redis.call('ZCARD', KEYS[5])
  end

  for a = admissionsFrom, #A, ADMIT_FIELDS do
    local id, est, cost, day, month = A[a], tonumber(A[a + 1]), tonumber(A[a + 2]), A[a + 3], A[a + 4]
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
      used = redis.call('ZCARD', KEYS[2])
      -- just switched from counters: the log does not hold the window yet, the counters do
      if meta[5] and now - tonumber(meta[5]) < window and rs > used then used = rs end
    else
      used = rs
    end
    local useWindow = used < rpm
    if refused == '' and not useWindow and btok < 1 then refused = 'requests' end
    if refused == '' and tpm and ts + est > tpm then refused = 'tokens' end
    local inflight = held
    if refused == '' and maxc and inflight >= maxc then refused = 'concurrency' end

    local retry, rateTokens, dayTokens, monthTokens, costCharged, lease = 0, -1, -1, -1, 0, 0
    if refused == '' then
      if useWindow then
        if logMode then
          redis.call('ZADD', KEYS[2], now, id)
          redis.call('PEXPIRE', KEYS[2], window)
        end
        rcur, curChanged = rcur + 1, true
        rs, used = rs + 1, used + 1
      else
        btok, burstSpent = btok - 1, true
      end
      if tpm then
        tcur, curChanged = tcur + est, true
        ts, rateTokens = ts + est, est
      end
      if maxc then
        leased[#leased + 1] = now + leaseTtl
        leased[#leased + 1] = id
        held = held + 1
        inflight, lease = held, 1
      end
      if g then
        if dayFresh then g.day, g.dt = day, 0 end
        if monthFresh then g.month, g.mt, g.mc = month, 0, 0 end
        if daily then g.dt = g.dt + est; dayTokens = est end
        if monthly then g.mt = g.mt + est; monthTokens = est end
        if mcost then g.mc = g.mc + cost; costCharged = 1 end
        budChanged = true
      end
    elseif refused == 'requests' then
      if logMode and used >= rpm and used == redis.call('ZCARD', KEYS[2]) then
        local entry = redis.call('ZRANGE', KEYS[2], used - rpm, used - rpm, 'WITHSCORES')
        retry = tonumber(entry[2]) + window - now
      else
        retry = drain('r', rs, rpm - 1)
      end
      if burst > 0 then retry = math.min(retry, math.ceil((1 - btok) * burstWindow / burst)) end
    elseif refused == 'tokens' then
      if est > tpm then retry = window else retry = drain('t', ts, tpm - est) end
    elseif refused == 'concurrency' then
      retry = 1000
    end

    local resetMs = 0
    if used > 0 then
      if logMode and redis.call('EXISTS', KEYS[2]) == 1 then
        local newest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
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
    local chargedDay, chargedMonth = day, month
    if refused == '' and g then chargedDay, chargedMonth = g.day or day, g.month or month end
    local decision = {refused, rpm, burst, p[3] or '', p[4] or '', p[5] or '', p[6] or '', p[7] or '',
      math.max(0, rpm - used), resetMs, math.floor(btok + 1e-9), burstReset,
      math.max(0, (tpm or 0) - ts), tokensReset, inflight, math.max(0, math.ceil(retry)),
      cur, rateTokens, dayTokens, monthTokens, costCharged, lease, chargedDay, chargedMonth}
    for i = 1, #decision do out[#out + 1] = decision[i] end
  end
  if burstSpent then
    redis.call('HSET', KEYS[3], 'tokens', string.format('%.17g', btok), 'at', now)
    redis.call('PEXPIRE', KEYS[3], burstWindow)
  end
  if #leased > 0 then
    redis.call('ZADD', KEYS[5], unpack(leased))
    redis.call('PEXPIRE', KEYS[5], leaseTtl + 1000)
  end
end
if budChanged then
  local fields = {}
  if bud.day then
    for _, v in ipairs({'day', bud.day, 'dt', int(bud.dt)}) do fields[#fields + 1] = v end
  end
  if bud.month then
    for _, v in ipairs({'month', bud.month, 'mt', int(bud.mt), 'mc', string.format('%.17g', bud.mc)}) do fields[#fields + 1] = v end
  end
  redis.call('HSET', KEYS[6], unpack(fields))
  redis.call('PEXPIRE', KEYS[6], 32 * 86400000)
end
saveSub()
return out
