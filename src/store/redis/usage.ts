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
import { luaScript } from './lua-script.js';

/** Expired buckets and stored things freed per call, so no call's work grows without bound. */
const PRUNE_LIMIT = 500;

/** reconcile(): frees the storage of things that expired (reconcile-storage.lua), for other scripts. */
export const RECONCILE_LUA = luaScript(new URL('./reconcile-storage.lua', import.meta.url));

/** claim(): a replica's write, once (claim-write.lua), for apply-usage.lua. */
const CLAIM_LUA = luaScript(new URL('./claim-write.lua', import.meta.url));

/** Applies one part of a usage batch of one project, once: apply-usage.lua. */
const APPLY_SCRIPT = luaScript(new URL('./apply-usage.lua', import.meta.url), { PRUNE_LIMIT }, [RECONCILE_LUA, CLAIM_LUA]);

/** A window of buckets, oldest first: read-usage.lua. */
const READ_SCRIPT = luaScript(new URL('./read-usage.lua', import.meta.url));

/** The storage total after freeing what expired: storage-bytes.lua. */
const STORAGE_SCRIPT = luaScript(new URL('./storage-bytes.lua', import.meta.url), { PRUNE_LIMIT }, [RECONCILE_LUA]);

type Scripted = RedisClient & {
  novaApplyUsage(numberOfKeys: number, ...args: (string | number)[]): Promise<number>;
  novaReadUsage(hash: string, index: string, startMs: number, endMs: number): Promise<string[]>;
  novaStorageBytes(total: string, expiry: string, sizes: string, held: string): Promise<number>;
};

const UNITS = { minute: 'm', hour: 'h' } as const;
/** Entries per script call: bounds one call's work and argument list. */
const ENTRIES_PER_CALL = 200;

/** Usage buckets in a fixed set of keys per project (see apply-usage.lua). */
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
    for (const [projectId, { entries, storageBytesDelta, budgets }] of aggregateUsage(events)) {
      for (let part = 0; part * ENTRIES_PER_CALL < Math.max(1, entries.length); part++) {
        const keys = [
          this.keys.usageStorage(projectId),
          this.keys.usageApplied(projectId),
          this.keys.usageStorageExpiry(projectId),
          this.keys.usageStorageSizes(projectId),
          this.keys.budgets(projectId),
          ...this.bucketKeys(projectId),
          this.keys.conversationBytesHeld(projectId),
        ];
        // A key's corrections name its budget hash, after the fixed keys: `kb`, its place (1-based, as Lua counts).
        const keyBudgets = new Map<string, number>();
        const corrections = part === 0 ? budgets : [];
        for (const { keyId } of corrections) {
          if (keyId !== undefined && !keyBudgets.has(keyId)) keyBudgets.set(keyId, keys.push(this.keys.keyRate(projectId, keyId, 'budget')));
        }
        const arg = JSON.stringify({
          replica: batch.replica,
          seq: batch.seq,
          sub: batch.sub + part,
          dedupMs: Math.max(1, Math.round(retention.dedupMs)),
          storageDelta: part === 0 ? storageBytesDelta : 0,
          // What the budget counters miss, once with the batch's first part (see apply-usage.lua).
          budgets: corrections.map(({ fence, keyId, ...correction }) => ({ ...correction, ...fence, ...(keyId === undefined ? {} : { kb: keyBudgets.get(keyId) }) })),
          // Strings: the exact integers, whatever their size, that the bucket fields and scores are.
          m: { cutoff: String(cutoffMinute), ttlMs: MINUTE_MS + retention.minuteMs },
          h: { cutoff: String(cutoffHour), ttlMs: HOUR_MS + retention.hourMs },
          entries: entries.slice(part * ENTRIES_PER_CALL, (part + 1) * ENTRIES_PER_CALL).map(({ dimension, group, minuteMs, counts }) => ({
            dimension,
            group: group ?? '',
            minuteStart: String(minuteMs),
            hourStart: String(Math.floor(minuteMs / HOUR_MS) * HOUR_MS),
            ...counts, // requests, promptTokens, …, errors: the names apply-usage.lua reads
          })),
        });
        totals.set(projectId, Number(await guard(this.redis.novaApplyUsage(keys.length, ...keys, arg))));
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
      // A bucket written before the cache and reasoning tokens, or before the refusals and errors,
      // holds only the first seven or ten measures: the rest read 0 (apply-usage.lua).
      const [r = 0, pt = 0, ct = 0, img = 0, aud = 0, cu = 0, ca = 0, cpt = 0, cwt = 0, rt = 0, xr = 0, xt = 0, xc = 0, xb = 0, err = 0] = String(reply[i + 1])
        .split(',')
        .map(Number);
      out.push({
        startMs: Number(member.slice(0, bar)),
        group: dimension === 'all' || group === '' ? null : group,
        counts: {
          requests: r,
          promptTokens: pt,
          completionTokens: ct,
          imageGenerations: img,
          audioMs: aud,
          costMicros: cu,
          costAtto: ca,
          cachedPromptTokens: cpt,
          cacheWriteTokens: cwt,
          reasoningTokens: rt,
          refusedRequests: xr,
          refusedTokens: xt,
          refusedConcurrency: xc,
          refusedBudget: xb,
          errors: err,
        },
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
