import { randomBase62 } from '../http/ids.js';
import type { UsageMetrics } from '../metrics/usage-metrics.js';
import type { UsageEvent, UsageRetention, UsageStore } from '../store/quota-types.js';
import { StoreUnavailableError } from '../store/types.js';
import type { UsageMeter, UsageRecord } from './usage-meter.js';

const BATCH_SIZE = 500;
const RECENT_IDS = 10_000;

export interface BufferedUsageMeterOptions {
  store: UsageStore;
  metrics: UsageMetrics;
  retention: UsageRetention;
  /** Records kept while the store is unreachable; beyond it new records are dropped (and counted). */
  maxBuffered: number;
  flushIntervalMs: number;
  now?: () => number;
  onError?: (error: unknown, what: string) => void;
}

const finite = (value: number | undefined) => (value !== undefined && Number.isFinite(value) && value > 0 ? value : 0);

/**
 * Usage off the request path: record() appends to a bounded in-process buffer and returns;
 * a timer writes the buffer to the store in batches. While the store is unreachable the
 * records wait and are written when it returns. Exactly once: a second report of the same
 * request and part is dropped here (see accept), and each batch carries an id the store
 * applies once, so retrying a batch whose first attempt timed out (but ran) does not count twice.
 */
export class BufferedUsageMeter implements UsageMeter {
  private buffer: UsageEvent[] = [];
  private pending: { id: string; events: UsageEvent[] } | undefined;
  private readonly replica = randomBase62(10);
  private batches = 0;
  private readonly recent = new Set<string>();
  /** Requests admitted here (latest admission per id) and the parts they reported. */
  private readonly open = new Map<string, Set<string>>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private readonly now: () => number;

  constructor(private readonly options: BufferedUsageMeterOptions) {
    this.now = options.now ?? Date.now;
  }

  start(): this {
    this.timer ??= setInterval(() => void this.flush(), this.options.flushIntervalMs).unref();
    return this;
  }

  /** Records not yet written to the store. */
  get buffered(): number {
    return this.buffer.length + (this.pending?.events.length ?? 0);
  }

  record(usage: UsageRecord): void {
    try {
      if (!this.accept(usage)) return;
      const event: UsageEvent = {
        projectId: usage.projectId,
        eventId: `${usage.requestId}:${usage.part ?? 'usage'}`,
        atMs: usage.atMs ?? this.now(),
        counts: {
          requests: Math.round(finite(usage.requests)),
          promptTokens: Math.round(finite(usage.promptTokens)),
          completionTokens: Math.round(finite(usage.completionTokens)),
          imageGenerations: Math.round(finite(usage.imageGenerations)),
          audioMs: Math.round(finite(usage.audioSeconds) * 1000),
        },
        storageBytesDelta: Number.isFinite(usage.storageBytesDelta) ? Math.round(usage.storageBytesDelta!) : 0,
      };
      const { metrics } = this.options;
      if (this.buffered >= this.options.maxBuffered) {
        metrics.dropped.inc();
        return;
      }
      this.buffer.push(event);
      metrics.buffered.set(this.buffered);
      this.count(event, usage.model ?? 'none');
    } catch (error) {
      this.options.onError?.(error, 'usage record');
    }
  }

  /**
   * Once per request: admission (part "request") is called once per request by
   * construction and always counts; it opens the request for one report per part. A
   * second report of the same request and part is dropped. Keyed by what the request was
   * admitted as, so a client that reuses an x-request-id for several requests still has
   * every one of them counted.
   */
  private accept(usage: UsageRecord): boolean {
    const request = `${usage.projectId}:${usage.requestId}`;
    if (usage.part === 'request') {
      this.open.delete(request);
      this.open.set(request, new Set());
      if (this.open.size > RECENT_IDS) this.open.delete(this.open.keys().next().value!);
      return true;
    }
    const part = usage.part ?? 'usage';
    const reported = this.open.get(request);
    if (reported) {
      if (reported.has(part)) return false;
      reported.add(part);
      return true;
    }
    // Not admitted here (or long ago): fall back to remembering recent reports.
    const id = `${request}:${part}`;
    if (this.recent.has(id)) return false;
    this.recent.add(id);
    if (this.recent.size > RECENT_IDS) this.recent.delete(this.recent.values().next().value!);
    return true;
  }

  /** Writes what is buffered; stops at the first store failure (the rest waits for the next tick). */
  flush(): Promise<void> {
    this.flushing ??= this.drain().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  /** Stops the timer and makes a last attempt to write the buffer. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  private async drain(): Promise<void> {
    const { store, metrics, retention } = this.options;
    for (;;) {
      // A batch is frozen (id and events) until written, so its retry is the same batch.
      if (!this.pending) {
        if (this.buffer.length === 0) return;
        const events = this.buffer.splice(0, BATCH_SIZE);
        this.pending = { id: `${this.replica}.${(this.batches++).toString(36)}`, events };
      }
      const { id, events } = this.pending;
      try {
        const totals = await store.apply(id, events, retention);
        for (const [projectId, bytes] of totals) metrics.storageBytes.set(metrics.project(projectId), bytes);
        metrics.flushed.inc(events.length);
      } catch (error) {
        if (error instanceof StoreUnavailableError) {
          metrics.flushFailures.inc();
          this.options.onError?.(error, 'usage flush');
          return;
        }
        // Not the store being away but a bug: retrying would block the buffer forever.
        metrics.dropped.inc(events.length);
        this.options.onError?.(error, 'usage flush (batch dropped)');
      }
      this.pending = undefined;
      metrics.buffered.set(this.buffered);
    }
  }

  private count(event: UsageEvent, model: string): void {
    const { metrics } = this.options;
    const { counts, projectId } = event;
    if (counts.requests) metrics.requests.inc(metrics.project(projectId), counts.requests);
    const labels = (extra: Record<string, string> = {}) => metrics.project(projectId, { gen_ai_request_model: model, ...extra });
    if (counts.promptTokens) metrics.tokens.inc(labels({ type: 'prompt' }), counts.promptTokens);
    if (counts.completionTokens) metrics.tokens.inc(labels({ type: 'completion' }), counts.completionTokens);
    if (counts.imageGenerations) metrics.images.inc(labels(), counts.imageGenerations);
    if (counts.audioMs) metrics.audioSeconds.inc(labels(), counts.audioMs / 1000);
  }
}
