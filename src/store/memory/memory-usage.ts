import {
  addCounts,
  type BatchRef,
  type BudgetCorrection,
  aggregateUsage,
  emptyCounts,
  HOUR_MS,
  MINUTE_MS,
  normalizeCost,
  type StoredUsageBucket,
  type UsageCounts,
  type UsageDimension,
  type UsageEvent,
  type UsageGranularity,
  type UsageRetention,
  type UsageStore,
} from '../usage-types.js';

interface Bucket {
  startMs: number;
  group: string | null;
  counts: UsageCounts;
  expiresAt: number;
}

/** Usage buckets in process memory, with the Redis store's semantics (batch ids, retention, storage expiry). */
export class MemoryUsageStore implements UsageStore {
  /** Per granularity, dimension and project: buckets by `<start>|<group>`. */
  private readonly buckets_ = new Map<string, Map<string, Bucket>>();
  /** Per project and replica: the newest batch applied (see BatchRef). */
  private readonly marks = new Map<string, { seq: number; sub: number; atMs: number }>();
  private readonly storage = new Map<string, number>();
  /** Per project: stored things that expire, with their size and expiry. */
  private readonly expiring = new Map<string, Map<string, { bytes: number; expiresAtMs: number }>>();
  private applied = 0;

  /** `budgets`: where budget corrections go (the memory quota store's counters), once with their batch. */
  constructor(
    private readonly now: () => number = Date.now,
    private readonly budgets?: (projectId: string, corrections: BudgetCorrection[]) => void,
  ) {}

  async apply(batch: BatchRef, events: UsageEvent[], retention: UsageRetention): Promise<Map<string, number>> {
    const now = this.now();
    const totals = new Map<string, number>();
    for (const [projectId, { entries, storageBytesDelta, budgets }] of aggregateUsage(events)) {
      if (this.claim(projectId, batch, now, retention.dedupMs)) {
        for (const { dimension, group, minuteMs, counts } of entries) {
          this.add('minute', dimension, projectId, minuteMs, group, counts, MINUTE_MS + retention.minuteMs);
          this.add('hour', dimension, projectId, Math.floor(minuteMs / HOUR_MS) * HOUR_MS, group, counts, HOUR_MS + retention.hourMs);
        }
        if (storageBytesDelta) this.storage.set(projectId, (this.storage.get(projectId) ?? 0) + storageBytesDelta);
        if (budgets.length > 0) this.budgets?.(projectId, budgets);
      }
      totals.set(projectId, this.reconcile(projectId, now));
    }
    if (++this.applied >= 1000) {
      this.applied = 0;
      this.sweep(now);
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
    const now = this.now();
    const out: StoredUsageBucket[] = [];
    for (const bucket of this.buckets_.get(`${granularity}|${dimension}|${projectId}`)?.values() ?? []) {
      if (bucket.expiresAt > now && bucket.startMs >= startMs && bucket.startMs < endMs) {
        out.push({ startMs: bucket.startMs, group: bucket.group, counts: { ...bucket.counts } });
      }
    }
    return out.sort((a, b) => a.startMs - b.startMs);
  }

  async storageBytes(projectId: string): Promise<number> {
    return this.reconcile(projectId, this.now());
  }

  /** A stored thing of `bytes` more that expires at `expiresAtMs` (renewed on every write). */
  trackExpiry(projectId: string, id: string, bytes: number, expiresAtMs: number): void {
    let project = this.expiring.get(projectId);
    if (!project) this.expiring.set(projectId, (project = new Map()));
    const entry = project.get(id) ?? { bytes: 0, expiresAtMs };
    project.set(id, { bytes: entry.bytes + bytes, expiresAtMs });
  }

  private keepMarksMs = 0;

  /** True when the batch is past the replica's mark for the project (the mark then moves). */
  private claim(projectId: string, { replica, seq, sub }: BatchRef, now: number, keepMs: number): boolean {
    this.keepMarksMs = keepMs;
    const key = `${projectId}\u0000${replica}`;
    const mark = this.marks.get(key);
    if (mark && mark.atMs > now - keepMs && (mark.seq > seq || (mark.seq === seq && mark.sub >= sub))) return false;
    this.marks.set(key, { seq, sub, atMs: now });
    return true;
  }

  untrackExpiry(projectId: string, id: string): void {
    this.expiring.get(projectId)?.delete(id);
  }

  private reconcile(projectId: string, now: number): number {
    const project = this.expiring.get(projectId);
    for (const [id, entry] of project ?? []) {
      if (entry.expiresAtMs > now) continue;
      this.storage.set(projectId, (this.storage.get(projectId) ?? 0) - entry.bytes);
      project!.delete(id);
    }
    return this.storage.get(projectId) ?? 0;
  }

  private add(
    granularity: UsageGranularity,
    dimension: UsageDimension,
    projectId: string,
    startMs: number,
    group: string | null,
    counts: UsageCounts,
    keepMs: number,
  ): void {
    const mapKey = `${granularity}|${dimension}|${projectId}`;
    let map = this.buckets_.get(mapKey);
    if (!map) this.buckets_.set(mapKey, (map = new Map()));
    const key = `${startMs}|${group ?? ''}`;
    let bucket = map.get(key);
    if (!bucket || bucket.expiresAt <= this.now()) map.set(key, (bucket = { startMs, group, counts: emptyCounts(), expiresAt: 0 }));
    normalizeCost(addCounts(bucket.counts, counts));
    bucket.expiresAt = startMs + keepMs;
  }

  private sweep(now: number): void {
    for (const map of this.buckets_.values()) {
      for (const [key, bucket] of map) if (bucket.expiresAt <= now) map.delete(key);
    }
    for (const [key, mark] of this.marks) if (mark.atMs <= now - this.keepMarksMs) this.marks.delete(key);
  }
}
