import {
  aggregateUsage,
  HOUR_MS,
  MINUTE_MS,
  USAGE_DIMENSIONS,
  type StoredUsageBucket,
  type UsageDimension,
  type UsageEvent,
  type UsageGranularity,
  type BatchRef,
  type UsageRetention,
  type UsageStore,
} from '../usage-types.js';
import type { RedisClient } from './connect.js';
import { guard } from './guard.js';
import type { KeyNames } from './key-names.js';

/** Expired buckets and stored things freed per call, so no call's work grows without bound. */
const PRUNE_LIMIT = 500;
const ENTRY_ARGS = 11;

/**
 * Frees the storage of things that expired (conversations): their sizes leave the total and the
 * bytes held in conversations. By Redis's clock, the one key expiry follows. Keys: storage total,
 * expiry index (zset: id -> expiry ms), sizes (hash: id -> bytes), conversation bytes held.
 */
export const RECONCILE_LUA = `
local function reconcile(total, expiry, sizes, held, limit)
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  local gone = redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(gone) do
    local bytes = tonumber(redis.call('HGET', sizes, id) or '0')
    if bytes ~= 0 then
      redis.call('DECRBY', total, bytes)
      redis.call('DECRBY', held, bytes)
    end
    redis.call('HDEL', sizes, id)
    redis.call('ZREM', expiry, id)
  end
end
`;

/**
 * Claims a write for a replica: true when (seq, sub) is past the replica's high-water mark in the
 * project's `applied` hash (then the mark moves), false when it was applied already. Marks of
 * replicas silent for keepMs are pruned once the hash holds more than 16, and the hash expires
 * keepMs after the last write: its size follows the replicas that write, never the request rate.
 */
const CLAIM_LUA = `
local function claim(applied, replica, seq, sub, keepMs)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local mark = redis.call('HGET', applied, replica)
  if mark then
    local s, u = string.match(mark, '^(%d+):(%d+):')
    s = tonumber(s)
    if s > seq or (s == seq and tonumber(u) >= sub) then return false end
  end
  redis.call('HSET', applied, replica, string.format('%d:%d:%d', seq, sub, now))
  if redis.call('HLEN', applied) > 16 then
    local all = redis.call('HGETALL', applied)
    for i = 1, #all, 2 do
      if tonumber(string.match(all[i + 1], ':(%d+)$')) < now - keepMs then redis.call('HDEL', applied, all[i]) end
    end
  end
  redis.call('PEXPIRE', applied, keepMs)
  return true
end
`;

/**
 * Applies one part of a usage batch of one project, once: the part is claimed against the
 * replica's high-water mark in the same script as the increments, so a retry after a lost reply
 * is a no-op.
 * Each granularity (m, h) and dimension (all, model, api_key) is one hash, a field per
 * bucket (`<start>|<group>` -> `r,pt,ct,img,aud,cu,ca`), plus a zset index of the fields by
 * start: any window is one ZRANGEBYSCORE and HMGETs of what it finds. The sums are integers
 * below 2^53 (the meter's caps keep them there), so Lua's doubles add them exactly; cost is
 * fixed point (`cu` micro-dollars, `ca` 1e-18 dollars carried into `cu` at 1e12). Buckets
 * past retention leave the hash and index here (a bounded number per call); the keys expire
 * after the retention of their newest bucket.
 * KEYS: storage total, applied marks, expiry index, sizes, then for m then h, for all, model, api_key: hash, index;
 * last, the conversation bytes held.
 * ARGV: dedup ms, storage delta, cutoff m, cutoff h, key ttl m, key ttl h, replica, seq, sub,
 *       then per entry: dimension (1-3), group, minute start, hour start, r, pt, ct, img, aud, cu, ca.
 * Returns the storage total.
 */
const APPLY_SCRIPT = `${RECONCILE_LUA}${CLAIM_LUA}
if claim(KEYS[2], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[1])) then
  local touched = {}
  for a = 10, #ARGV, ${ENTRY_ARGS} do
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
    local old = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. ARGV[3 + g], 'LIMIT', 0, ${PRUNE_LIMIT})
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
reconcile(KEYS[1], KEYS[3], KEYS[4], KEYS[#KEYS], ${PRUNE_LIMIT})
return tonumber(redis.call('GET', KEYS[1]) or '0')
`;

/** KEYS: hash, index. ARGV: start ms, end ms (excluded). Returns member, measures (`r,pt,…`) per bucket, oldest first. */
const READ_SCRIPT = `
local members = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[1], '(' .. ARGV[2])
local out = {}
for i = 1, #members, 1000 do
  local chunk = {unpack(members, i, math.min(i + 999, #members))}
  local values = redis.call('HMGET', KEYS[1], unpack(chunk))
  for j = 1, #chunk do
    out[#out + 1] = chunk[j]
    out[#out + 1] = values[j] or '0,0,0,0,0,0,0'
  end
end
return out
`;

/** KEYS: storage total, expiry index, sizes, conversation bytes held. Returns the storage total after freeing what expired. */
const STORAGE_SCRIPT = `${RECONCILE_LUA}
reconcile(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ${PRUNE_LIMIT})
return tonumber(redis.call('GET', KEYS[1]) or '0')
`;

type Scripted = RedisClient & {
  novaApplyUsage(numberOfKeys: number, ...args: (string | number)[]): Promise<number>;
  novaReadUsage(hash: string, index: string, startMs: number, endMs: number): Promise<string[]>;
  novaStorageBytes(total: string, expiry: string, sizes: string, held: string): Promise<number>;
};

const UNITS = { minute: 'm', hour: 'h' } as const;
/** Entries per script call: bounds one call's work and argument list. */
const ENTRIES_PER_CALL = 200;

/** Usage buckets in a fixed set of keys per project (see APPLY_SCRIPT). */
export class RedisUsageStore implements UsageStore {
  private readonly redis: Scripted;

  constructor(
    redis: RedisClient,
    private readonly keys: KeyNames,
    private readonly now: () => number = Date.now,
  ) {
    // The number of keys is fixed, but passed on each call like the other scripts' callers do.
    redis.defineCommand('novaApplyUsage', { lua: APPLY_SCRIPT });
    redis.defineCommand('novaReadUsage', { lua: READ_SCRIPT, numberOfKeys: 2 });
    redis.defineCommand('novaStorageBytes', { lua: STORAGE_SCRIPT, numberOfKeys: 4 });
    this.redis = redis as Scripted;
  }

  private bucketKeys(projectId: string): string[] {
    const keys: string[] = [];
    for (const unit of ['m', 'h'] as const) {
      for (const dimension of USAGE_DIMENSIONS) {
        keys.push(this.keys.usageBuckets(projectId, unit, dimension), this.keys.usageBucketIndex(projectId, unit, dimension));
      }
    }
    return keys;
  }

  async apply(batch: BatchRef, events: UsageEvent[], retention: UsageRetention): Promise<Map<string, number>> {
    const totals = new Map<string, number>();
    const now = this.now();
    const cutoffMinute = Math.floor(now / MINUTE_MS) * MINUTE_MS - retention.minuteMs;
    const cutoffHour = Math.floor(now / HOUR_MS) * HOUR_MS - retention.hourMs;
    for (const [projectId, { entries, storageBytesDelta }] of aggregateUsage(events)) {
      for (let part = 0; part * ENTRIES_PER_CALL < Math.max(1, entries.length); part++) {
        const keys = [
          this.keys.usageStorage(projectId),
          this.keys.usageApplied(projectId),
          this.keys.usageStorageExpiry(projectId),
          this.keys.usageStorageSizes(projectId),
          ...this.bucketKeys(projectId),
          this.keys.conversationBytesHeld(projectId),
        ];
        const args: (string | number)[] = [
          Math.max(1, Math.round(retention.dedupMs)),
          part === 0 ? storageBytesDelta : 0,
          cutoffMinute,
          cutoffHour,
          MINUTE_MS + retention.minuteMs,
          HOUR_MS + retention.hourMs,
          batch.replica,
          batch.seq,
          batch.sub + part,
        ];
        for (const { dimension, group, minuteMs, counts } of entries.slice(part * ENTRIES_PER_CALL, (part + 1) * ENTRIES_PER_CALL)) {
          args.push(
            USAGE_DIMENSIONS.indexOf(dimension) + 1,
            group ?? '',
            String(minuteMs),
            String(Math.floor(minuteMs / HOUR_MS) * HOUR_MS),
            ...[counts.requests, counts.promptTokens, counts.completionTokens, counts.imageGenerations, counts.audioMs, counts.costMicros, counts.costAtto].map(
              (value) => BigInt(value).toString(),
            ),
          );
        }
        totals.set(projectId, Number(await guard(this.redis.novaApplyUsage(keys.length, ...keys, ...args))));
      }
    }
    return totals;
  }

  async buckets(
    projectId: string,
    granularity: UsageGranularity,
    startMs: number,
    endMs: number,
    dimension: UsageDimension = 'all',
  ): Promise<StoredUsageBucket[]> {
    const unit = UNITS[granularity];
    const reply = await guard(
      this.redis.novaReadUsage(this.keys.usageBuckets(projectId, unit, dimension), this.keys.usageBucketIndex(projectId, unit, dimension), startMs, endMs),
    );
    const out: StoredUsageBucket[] = [];
    for (let i = 0; i < reply.length; i += 2) {
      const member = String(reply[i]);
      const bar = member.indexOf('|');
      const group = member.slice(bar + 1);
      const [r, pt, ct, img, aud, cu, ca] = String(reply[i + 1]).split(',').map(Number) as number[];
      out.push({
        startMs: Number(member.slice(0, bar)),
        group: dimension === 'all' || group === '' ? null : group,
        counts: { requests: r!, promptTokens: pt!, completionTokens: ct!, imageGenerations: img!, audioMs: aud!, costMicros: cu!, costAtto: ca! },
      });
    }
    return out;
  }

  async storageBytes(projectId: string): Promise<number> {
    return Number(
      await guard(
        this.redis.novaStorageBytes(
          this.keys.usageStorage(projectId),
          this.keys.usageStorageExpiry(projectId),
          this.keys.usageStorageSizes(projectId),
          this.keys.conversationBytesHeld(projectId),
        ),
      ),
    );
  }
}
