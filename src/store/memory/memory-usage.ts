import {
  addCounts,
  aggregateByMinute,
  emptyCounts,
  HOUR_MS,
  MINUTE_MS,
  type StoredUsageBucket,
  type UsageCounts,
  type UsageEvent,
  type UsageGranularity,
  type UsageRetention,
  type UsageStore,
} from '../quota-types.js';

interface Bucket {
  counts: UsageCounts;
  expiresAt: number;
}

/** Usage buckets in process memory, with the Redis store's semantics (batch ids and TTLs included). */
export class MemoryUsageStore implements UsageStore {
  private readonly minute = new Map<string, Bucket>();
  private readonly hour = new Map<string, Bucket>();
  private readonly seenBatches = new Map<string, number>();
  private readonly storage = new Map<string, number>();
  private applied = 0;

  constructor(private readonly now: () => number = Date.now) {}

  async apply(batchId: string, events: UsageEvent[], retention: UsageRetention): Promise<Map<string, number>> {
    const now = this.now();
    const totals = new Map<string, number>();
    const seenUntil = this.seenBatches.get(batchId);
    const fresh = seenUntil === undefined || seenUntil <= now;
    this.seenBatches.set(batchId, now + retention.dedupMs);
    for (const [projectId, { minutes, storageBytesDelta }] of aggregateByMinute(events)) {
      if (fresh) {
        for (const [minute, counts] of minutes) {
          this.add(this.minute, projectId, minute, counts, MINUTE_MS + retention.minuteMs);
          const hour = Math.floor(minute / HOUR_MS) * HOUR_MS;
          this.add(this.hour, projectId, hour, counts, HOUR_MS + retention.hourMs);
        }
        if (storageBytesDelta) this.storage.set(projectId, (this.storage.get(projectId) ?? 0) + storageBytesDelta);
      }
      totals.set(projectId, this.storage.get(projectId) ?? 0);
    }
    if (++this.applied >= 1000) {
      this.applied = 0;
      this.sweep(now);
    }
    return totals;
  }

  async buckets(projectId: string, granularity: UsageGranularity, startMs: number, endMs: number): Promise<StoredUsageBucket[]> {
    const now = this.now();
    const unit = granularity === 'minute' ? MINUTE_MS : HOUR_MS;
    const map = granularity === 'minute' ? this.minute : this.hour;
    const out: StoredUsageBucket[] = [];
    for (let at = Math.ceil(startMs / unit) * unit; at < endMs; at += unit) {
      const bucket = map.get(`${projectId}:${at}`);
      if (bucket && bucket.expiresAt > now) out.push({ startMs: at, counts: { ...bucket.counts } });
    }
    return out;
  }

  async storageBytes(projectId: string): Promise<number> {
    return this.storage.get(projectId) ?? 0;
  }

  private add(map: Map<string, Bucket>, projectId: string, start: number, counts: UsageCounts, keepMs: number): void {
    const key = `${projectId}:${start}`;
    let bucket = map.get(key);
    if (!bucket || bucket.expiresAt <= this.now()) map.set(key, (bucket = { counts: emptyCounts(), expiresAt: 0 }));
    addCounts(bucket.counts, counts);
    bucket.expiresAt = start + keepMs;
  }

  private sweep(now: number): void {
    for (const map of [this.minute, this.hour]) {
      for (const [key, bucket] of map) if (bucket.expiresAt <= now) map.delete(key);
    }
    for (const [id, until] of this.seenBatches) if (until <= now) this.seenBatches.delete(id);
  }
}
