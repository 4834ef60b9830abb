import { randomBase62 } from '../core/ids.js';
import { RecentMap } from '../core/recent-map.js';
import type { UsageMetrics } from '../metrics/usage-metrics.js';
import {
  addCounts,
  costParts,
  emptyCounts,
  MINUTE_MS,
  type BudgetCorrection,
  type UsageEvent,
  type UsageRetention,
  type UsageStore,
} from '../store/usage-types.js';
import { StoreUnavailableError } from '../store/types.js';
import type { UsageMeter, UsageRecord } from './usage-meter.js';
import { validUsage } from './usage-validation.js';

const BATCH_SIZE = 500;
/** Records among events: a model attribution (an event of the model dimension only) is part of its record. */
const records = (events: UsageEvent[]) => events.filter((event) => event.dimensions === undefined).length;
/** The sub-position of a refused batch's records when written one by one: after its parts. */
const RECORD_BY_RECORD = 1_000_000;
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
  /** A value of a record that was refused (and counted as 0); never holds a secret. */
  onInvalid?: (detail: { project_id: string; request_id: string; field: string; value: string }) => void;
}

interface OpenRequest {
  atMs: number;
  apiKeyId: string | null;
  /** Parts reported so far (a request usually reports one). */
  parts: string[] | null;
  /** Whether the request's count moved to its model already (see attribute). */
  modelled: boolean;
}

/**
 * Usage off the request path: record() appends to a bounded in-process buffer and returns;
 * a timer writes the buffer to the store in batches. While the store is unreachable the
 * records wait and are written when it returns. Exactly once: a second report of the same
 * request and part is dropped here (see accept), and each batch carries an id the store
 * applies once, so retrying a batch whose first attempt timed out (but ran) does not count twice.
 */
export class BufferedUsageMeter implements UsageMeter {
  private buffer: UsageEvent[] = [];
  private pending: { seq: number; events: UsageEvent[] } | undefined;
  private readonly replica = randomBase62(10);
  private batches = 0;
  private readonly recent = new RecentMap<string, true>(RECENT_IDS);
  /** Requests admitted here (latest admission per id): when, by which key, the parts they reported. */
  private readonly open = new RecentMap<string, OpenRequest>(RECENT_IDS);
  /**
   * Refusal events still in the buffer, by project, model, key and minute: a refusal adds to one
   * of them, so a flood of refused requests holds one event per minute and group, not one per request.
   */
  private readonly refusals = new Map<string, UsageEvent>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private readonly now: () => number;

  constructor(private readonly options: BufferedUsageMeterOptions) {
    this.now = options.now ?? Date.now;
    options.metrics.watchBuffered(() => this.buffered);
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
      const request = this.accept(usage);
      if (request === false) return;
      const { metrics } = this.options;
      const { counts, cost, storageBytesDelta, invalid } = validUsage(usage);
      for (const { field, value } of invalid) {
        metrics.invalidValues.inc({ field });
        this.options.onInvalid?.({ project_id: usage.projectId, request_id: usage.requestId, field, value: String(value).slice(0, 40) });
      }
      const { costMicros, costAtto } = costParts(cost);
      const event: UsageEvent = {
        projectId: usage.projectId,
        eventId: `${usage.requestId}:${usage.part ?? 'usage'}`,
        atMs: usage.atMs ?? this.now(),
        counts: {
          requests: counts.requests,
          promptTokens: counts.promptTokens,
          completionTokens: counts.completionTokens,
          imageGenerations: counts.imageGenerations,
          audioMs: counts.audioMs,
          costMicros,
          costAtto,
          cachedPromptTokens: counts.cachedPromptTokens,
          cacheWriteTokens: counts.cacheWriteTokens,
          reasoningTokens: counts.reasoningTokens,
          refusedRequests: counts.refusedRequests,
          refusedTokens: counts.refusedTokens,
          refusedConcurrency: counts.refusedConcurrency,
          refusedBudget: counts.refusedBudget,
          errors: counts.errors,
        },
        storageBytesDelta,
        model: usage.model ?? null,
        apiKeyId: usage.apiKeyId ?? request?.apiKeyId ?? null,
      };
      const budget = usage.budget && finiteCorrection(usage.budget);
      if (budget) {
        event.budget = budget;
        // A correction alone (admission.ts) adds to no bucket: it only rides on the batch.
        if (Object.values(event.counts).every((count) => count === 0) && storageBytesDelta === 0) event.dimensions = [];
      }
      if (usage.part === 'refusal' && this.addRefusal(event)) return;
      const moved = request && !request.modelled && event.model !== null ? this.attribute(request, event) : null;
      if (this.buffered + (moved ? 3 : 1) > this.options.maxBuffered) {
        metrics.dropped.inc();
        return;
      }
      this.buffer.push(event);
      if (usage.part === 'refusal') this.refusals.set(refusalKey(event), event);
      if (moved) this.buffer.push(moved[0], moved[1]);
      this.count(event, cost);
    } catch (error) {
      this.options.onError?.(error, 'usage record');
    }
  }

  /** Adds a refusal to the buffered one of its group and minute; false when there is none yet. */
  private addRefusal(event: UsageEvent): boolean {
    const buffered = this.refusals.get(refusalKey(event));
    if (!buffered) return false;
    addCounts(buffered.counts, event.counts);
    return true;
  }

  /**
   * Admission counts a request under the model its body names when that model is configured (the
   * common case: nothing to move). Otherwise it counts it before its route knows the model: under
   * the model dimension the count moves from "no model" to the model at the first report that
   * names one, at the admission's time, so every bucket's group sum stays equal to its ungrouped total.
   */
  private attribute(request: OpenRequest, event: UsageEvent): [UsageEvent, UsageEvent] {
    request.modelled = true;
    const moved = (model: string | null, requests: number): UsageEvent => ({
      ...event,
      eventId: `${event.eventId}:model`,
      atMs: request.atMs,
      counts: { ...emptyCounts(), requests },
      storageBytesDelta: 0,
      model,
      apiKeyId: request.apiKeyId,
      dimensions: ['model'],
    });
    return [moved(event.model, 1), moved(null, -1)];
  }

  /**
   * Once per request: admission (part "request") is called once per request by
   * construction and always counts; it opens the request for one report per part. A
   * second report of the same request and part is dropped (false). Keyed by what the
   * request was admitted as, so a client that reuses an x-request-id for several requests
   * still has every one of them counted. Returns the open request when admitted here.
   */
  private accept(usage: UsageRecord): OpenRequest | undefined | false {
    // Admission reports a refused request once by construction: nothing to remember of it.
    if (usage.part === 'refusal') return undefined;
    const request = `${usage.projectId}:${usage.requestId}`;
    if (usage.part === 'request') {
      const opened: OpenRequest = {
        atMs: usage.atMs ?? this.now(),
        apiKeyId: usage.apiKeyId ?? null,
        parts: null,
        modelled: usage.model !== undefined && usage.model !== null,
      };
      this.open.set(request, opened);
      return undefined;
    }
    const part = usage.part ?? 'usage';
    const opened = this.open.get(request);
    if (opened) {
      if (opened.parts?.includes(part)) return false;
      (opened.parts ??= []).push(part);
      return opened;
    }
    // Not admitted here (or long ago): fall back to remembering recent reports.
    const id = `${request}:${part}`;
    if (this.recent.has(id)) return false;
    this.recent.set(id, true);
    return undefined;
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
        // A batch is frozen: later refusals start new events (those left in the buffer merely stop taking more).
        this.refusals.clear();
        this.pending = { seq: this.batches++, events };
      }
      const { seq, events } = this.pending;
      try {
        const totals = await store.apply({ replica: this.replica, seq, sub: 0 }, events, retention);
        for (const [projectId, bytes] of totals) metrics.storageBytes.set(metrics.project(projectId), bytes);
        metrics.flushed.inc(records(events));
      } catch (error) {
        if (error instanceof StoreUnavailableError) {
          metrics.flushFailures.inc();
          this.options.onError?.(error, 'usage flush');
          return;
        }
        // Not the store being away: the store refused the batch. Each event is written on
        // its own, so one refused record never takes the others with it.
        this.options.onError?.(error, 'usage flush (batch refused; writing its records one by one)');
        if (!(await this.applyEach(seq, events))) return;
      }
      this.pending = undefined;
    }
  }

  /** Writes the events of a refused batch one at a time; false when the store went away meanwhile (the batch stays pending). */
  private async applyEach(seq: number, events: UsageEvent[]): Promise<boolean> {
    const { store, metrics, retention } = this.options;
    for (const [index, event] of events.entries()) {
      try {
        // After every part of the whole batch (sub 0 + part), in the same order on every retry.
        await store.apply({ replica: this.replica, seq, sub: RECORD_BY_RECORD + index }, [event], retention);
        metrics.flushed.inc(records([event]));
      } catch (error) {
        if (error instanceof StoreUnavailableError) {
          metrics.flushFailures.inc();
          return false;
        }
        metrics.dropped.inc();
        this.options.onError?.(error, `usage flush (record ${event.eventId} refused and dropped)`);
      }
    }
    return true;
  }

  private count(event: UsageEvent, cost: number): void {
    const { metrics } = this.options;
    const { counts, projectId } = event;
    if (counts.requests) metrics.requests.inc(metrics.project(projectId), counts.requests);
    if (!counts.promptTokens && !counts.completionTokens && !counts.imageGenerations && !counts.audioMs && !(cost > 0)) return;
    const model = event.model ?? 'none';
    if (counts.promptTokens) metrics.tokens.inc(metrics.project(projectId, { gen_ai_request_model: model, type: 'prompt' }), counts.promptTokens);
    if (counts.completionTokens) metrics.tokens.inc(metrics.project(projectId, { gen_ai_request_model: model, type: 'completion' }), counts.completionTokens);
    const details = metrics.tokenDetails;
    if (counts.cachedPromptTokens) details.inc(metrics.project(projectId, { gen_ai_request_model: model, type: 'cached_prompt' }), counts.cachedPromptTokens);
    if (counts.cacheWriteTokens) details.inc(metrics.project(projectId, { gen_ai_request_model: model, type: 'cache_write' }), counts.cacheWriteTokens);
    if (counts.reasoningTokens) details.inc(metrics.project(projectId, { gen_ai_request_model: model, type: 'reasoning' }), counts.reasoningTokens);
    const byModel = metrics.project(projectId, { gen_ai_request_model: model });
    if (counts.imageGenerations) metrics.images.inc(byModel, counts.imageGenerations);
    if (counts.audioMs) metrics.audioSeconds.inc(byModel, counts.audioMs / 1000);
    if (cost > 0) metrics.cost.inc(byModel, cost);
  }

}

/** The group and minute a refusal event adds to. */
const refusalKey = (event: UsageEvent) => `${event.projectId}\u0000${event.model ?? ''}\u0000${event.apiKeyId ?? ''}\u0000${Math.floor(event.atMs / MINUTE_MS)}`;

/** The correction, or undefined when a number in it is not finite (it would poison the counters). */
function finiteCorrection(budget: BudgetCorrection): BudgetCorrection | undefined {
  const { dayTokens, monthTokens, monthCost, settledDayTokens, settledMonthTokens, settledMonthCost } = budget;
  return [dayTokens, monthTokens, monthCost, settledDayTokens, settledMonthTokens, settledMonthCost].every(Number.isFinite) ? budget : undefined;
}
