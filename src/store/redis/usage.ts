import {
  aggregateByMinute,
  HOUR_MS,
  MINUTE_MS,
  type StoredUsageBucket,
  type UsageCounts,
  type UsageEvent,
  type UsageGranularity,
  type UsageRetention,
  type UsageStore,
} from '../quota-types.js';
import type { RedisClient } from './connect.js';
import { execAll, guard } from './guard.js';
import type { KeyNames } from './key-names.js';

const FIELDS = ['r', 'pt', 'ct', 'img', 'aud'] as const;
const MINUTES_PER_CALL = 100;
const READ_CHUNK = 1000;

/**
 * Applies one part of a usage batch of one project, once: the part's id is claimed with
 * SET NX in the same script as the increments, so a retry after a lost reply is a no-op.
 * KEYS: storage total, part marker, then per minute: minute bucket, hour bucket.
 * ARGV: dedup ms, storage delta, then per minute: minute expiry, hour expiry (epoch ms), r, pt, ct, img, aud.
 * Returns the storage total.
 */
const APPLY_SCRIPT = `
local fields = {'r', 'pt', 'ct', 'img', 'aud'}
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then
  local n = (#KEYS - 2) / 2
  for i = 0, n - 1 do
    local a = 3 + i * 7
    for b = 0, 1 do
      local bucket = KEYS[3 + i * 2 + b]
      for f = 1, 5 do
        local value = tonumber(ARGV[a + 1 + f])
        if value ~= 0 then redis.call('HINCRBY', bucket, fields[f], value) end
      end
      redis.call('PEXPIREAT', bucket, ARGV[a + b])
    end
  end
  local delta = tonumber(ARGV[2])
  if delta ~= 0 then redis.call('INCRBY', KEYS[1], delta) end
end
return tonumber(redis.call('GET', KEYS[1]) or '0')
`;

type Scripted = RedisClient & { novaApplyUsage(numberOfKeys: number, ...args: (string | number)[]): Promise<number> };

const countsFrom = (hash: Record<string, string>): UsageCounts => ({
  requests: Number(hash.r ?? 0),
  promptTokens: Number(hash.pt ?? 0),
  completionTokens: Number(hash.ct ?? 0),
  imageGenerations: Number(hash.img ?? 0),
  audioMs: Number(hash.aud ?? 0),
});

/** Usage buckets: a hash per project and minute, and per project and hour, each with its own TTL. */
export class RedisUsageStore implements UsageStore {
  private readonly redis: Scripted;

  constructor(
    redis: RedisClient,
    private readonly keys: KeyNames,
  ) {
    // The number of keys varies with the batch, so it is passed on each call.
    redis.defineCommand('novaApplyUsage', { lua: APPLY_SCRIPT });
    this.redis = redis as Scripted;
  }

  async apply(batchId: string, events: UsageEvent[], retention: UsageRetention): Promise<Map<string, number>> {
    const totals = new Map<string, number>();
    for (const [projectId, { minutes, storageBytesDelta }] of aggregateByMinute(events)) {
      const entries = [...minutes].sort(([a], [b]) => a - b);
      for (let part = 0; part * MINUTES_PER_CALL < Math.max(1, entries.length); part++) {
        const slice = entries.slice(part * MINUTES_PER_CALL, (part + 1) * MINUTES_PER_CALL);
        const keys = [this.keys.usageStorage(projectId), this.keys.usageBatch(projectId, `${batchId}:${part}`)];
        const args: (string | number)[] = [Math.max(1, Math.round(retention.dedupMs)), part === 0 ? storageBytesDelta : 0];
        for (const [minute, counts] of slice) {
          const hour = Math.floor(minute / HOUR_MS) * HOUR_MS;
          keys.push(this.keys.usageBucket(projectId, 'm', minute), this.keys.usageBucket(projectId, 'h', hour));
          args.push(
            minute + MINUTE_MS + retention.minuteMs,
            hour + HOUR_MS + retention.hourMs,
            counts.requests,
            counts.promptTokens,
            counts.completionTokens,
            counts.imageGenerations,
            Math.round(counts.audioMs),
          );
        }
        totals.set(projectId, Number(await guard(this.redis.novaApplyUsage(keys.length, ...keys, ...args))));
      }
    }
    return totals;
  }

  async buckets(projectId: string, granularity: UsageGranularity, startMs: number, endMs: number): Promise<StoredUsageBucket[]> {
    const unit = granularity === 'minute' ? MINUTE_MS : HOUR_MS;
    const starts: number[] = [];
    for (let at = Math.ceil(startMs / unit) * unit; at < endMs; at += unit) starts.push(at);
    const out: StoredUsageBucket[] = [];
    for (let i = 0; i < starts.length; i += READ_CHUNK) {
      const chunk = starts.slice(i, i + READ_CHUNK);
      const pipeline = this.redis.pipeline();
      chunk.forEach((at) => pipeline.hgetall(this.keys.usageBucket(projectId, granularity === 'minute' ? 'm' : 'h', at)));
      const results = await execAll(pipeline);
      results.forEach((hash, index) => {
        const fields = hash as Record<string, string>;
        if (FIELDS.some((field) => fields[field] !== undefined)) out.push({ startMs: chunk[index]!, counts: countsFrom(fields) });
      });
    }
    return out;
  }

  async storageBytes(projectId: string): Promise<number> {
    return Number((await guard(this.redis.get(this.keys.usageStorage(projectId)))) ?? 0);
  }
}
