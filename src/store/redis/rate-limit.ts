import { fullPolicy } from '../policy.js';
import { randomBase62 } from '../../http/ids.js';
import type { AdmissionDecision, AdmissionSettings, QuotaStore } from '../quota-types.js';
import type { RedisClient } from './connect.js';
import { guard } from './guard.js';
import type { KeyNames } from './key-names.js';

/**
 * One admission decision in one round trip, atomic across replicas.
 * KEYS: project hash (policy), window log (sorted set of admission times), burst state (hash).
 * ARGV: window ms, burst window ms, default rpm, default burst, unique member suffix.
 *
 * The clock is the Redis server's (TIME), so replicas' clock skew cannot widen the window.
 * A request counts against the rolling window while fewer than requests_per_minute
 * admissions lie in it; otherwise it draws a burst token (refilling continuously at
 * burst_limit per burst window); otherwise it is refused and nothing is written.
 * Returns {allowed, rpm, burst, remaining, reset ms, burst remaining, burst reset ms, retry ms}.
 */
const ADMIT_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local burstWindow = tonumber(ARGV[2])
local policy = redis.call('HMGET', KEYS[1], 'requests_per_minute', 'burst_limit')
local rpm = tonumber(policy[1]) or tonumber(ARGV[3])
local burst = tonumber(policy[2]) or tonumber(ARGV[4])

redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
local used = redis.call('ZCARD', KEYS[2])

local state = redis.call('HMGET', KEYS[3], 'tokens', 'at')
local tokens = burst
if state[1] then
  tokens = math.min(burst, tonumber(state[1]) + (now - tonumber(state[2])) * burst / burstWindow)
end

local allowed = 0
if used < rpm then
  allowed = 1
  used = used + 1
  redis.call('ZADD', KEYS[2], now, now .. ':' .. ARGV[5])
  redis.call('PEXPIRE', KEYS[2], window)
elseif tokens >= 1 then
  allowed = 1
  tokens = tokens - 1
  redis.call('HSET', KEYS[3], 'tokens', string.format('%.17g', tokens), 'at', now)
  redis.call('PEXPIRE', KEYS[3], burstWindow)
end

local resetMs = 0
if used > 0 then
  local newest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  resetMs = tonumber(newest[2]) + window - now
end
local burstReset = 0
if burst > 0 and tokens < burst then burstReset = math.ceil((burst - tokens) * burstWindow / burst) end
local retry = 0
if allowed == 0 then
  local entry = redis.call('ZRANGE', KEYS[2], used - rpm, used - rpm, 'WITHSCORES')
  retry = tonumber(entry[2]) + window - now
  if burst > 0 then
    local burstWait = math.ceil((1 - tokens) * burstWindow / burst)
    if burstWait < retry then retry = burstWait end
  end
end
return {allowed, rpm, burst, math.max(0, rpm - used), resetMs, math.floor(tokens + 1e-9), burstReset, retry}
`;

type Scripted = RedisClient & {
  novaAdmit(...args: (string | number)[]): Promise<number[]>;
};

export class RedisQuotaStore implements QuotaStore {
  private readonly redis: Scripted;
  /** Members of the window log must be unique: replica id + sequence. */
  private readonly replica = randomBase62(8);
  private sequence = 0;

  constructor(
    redis: RedisClient,
    private readonly keys: KeyNames,
  ) {
    redis.defineCommand('novaAdmit', { numberOfKeys: 3, lua: ADMIT_SCRIPT });
    this.redis = redis as Scripted;
  }

  async admit(projectId: string, settings: AdmissionSettings): Promise<AdmissionDecision> {
    this.sequence = (this.sequence + 1) % Number.MAX_SAFE_INTEGER;
    const reply = await guard(
      this.redis.novaAdmit(
        this.keys.project(projectId),
        this.keys.rateWindow(projectId),
        this.keys.rateBurst(projectId),
        Math.round(settings.windowMs),
        Math.round(settings.burstWindowMs),
        settings.defaults.requests_per_minute,
        settings.defaults.burst_limit,
        `${this.replica}${this.sequence.toString(36)}`,
      ),
    );
    const [allowed, rpm, burst, remaining, resetMs, burstRemaining, burstResetMs, retryAfterMs] = reply.map(Number) as [
      number, number, number, number, number, number, number, number,
    ];
    return {
      allowed: allowed === 1,
      policy: fullPolicy({ requests_per_minute: rpm, burst_limit: burst }),
      remaining,
      resetMs,
      burstRemaining,
      burstResetMs,
      retryAfterMs,
    };
  }
}
