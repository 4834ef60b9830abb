import type { RateLimitPolicy } from './types.js';

/** Rate-limit and usage parts of the Store (DESIGN.md section 7). */

export interface AdmissionSettings {
  /** The rolling window of requests_per_minute (60 000 in production). */
  windowMs: number;
  /** The burst allowance refills by burst_limit per this many ms. */
  burstWindowMs: number;
  /** Used when the project record has no policy (it should always have one). */
  defaults: RateLimitPolicy;
}

/**
 * One admission decision. `remaining`/`resetMs` describe the rolling window,
 * `burstRemaining`/`burstResetMs` the burst allowance, both after the decision.
 */
export interface AdmissionDecision {
  allowed: boolean;
  policy: RateLimitPolicy;
  /** Requests the window would still admit now (requests_per_minute minus those in the window). */
  remaining: number;
  /** Until the window is empty again (ms). */
  resetMs: number;
  /** Whole burst tokens left. */
  burstRemaining: number;
  /** Until the burst allowance is full again (ms). */
  burstResetMs: number;
  /** Refused: the real time until a request would be admitted (ms); 0 when allowed. */
  retryAfterMs: number;
}

export interface QuotaStore {
  /** Decides and, when admitted, records one request of the project: one round trip, atomic. */
  admit(projectId: string, settings: AdmissionSettings): Promise<AdmissionDecision>;
}

/** The measures a usage bucket holds (storage is a running total, not bucketed). */
export interface UsageCounts {
  requests: number;
  promptTokens: number;
  completionTokens: number;
  imageGenerations: number;
  audioMs: number;
}

/** One usage increment (one request's admission, or what the request consumed). */
export interface UsageEvent {
  projectId: string;
  /** `<request id>:<part>`: the meter drops a second record of the same id. */
  eventId: string;
  atMs: number;
  counts: UsageCounts;
  storageBytesDelta: number;
}

export interface UsageRetention {
  minuteMs: number;
  hourMs: number;
  /** How long a batch id is remembered, so a retried batch cannot count twice. */
  dedupMs: number;
}

export type UsageGranularity = 'minute' | 'hour';

export interface StoredUsageBucket {
  startMs: number;
  counts: UsageCounts;
}

export interface UsageStore {
  /**
   * Applies a batch at most once per batch id (within dedupMs): a batch whose first
   * attempt timed out, but may have run, is retried with the same id and the same
   * events and does not count twice. Returns the projects' storage totals.
   */
  apply(batchId: string, events: UsageEvent[], retention: UsageRetention): Promise<Map<string, number>>;
  /** Non-empty buckets of the granularity whose start lies in [startMs, endMs), oldest first. */
  buckets(projectId: string, granularity: UsageGranularity, startMs: number, endMs: number): Promise<StoredUsageBucket[]>;
  storageBytes(projectId: string): Promise<number>;
}

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;

export const emptyCounts = (): UsageCounts => ({ requests: 0, promptTokens: 0, completionTokens: 0, imageGenerations: 0, audioMs: 0 });

export function addCounts(into: UsageCounts, from: UsageCounts): UsageCounts {
  into.requests += from.requests;
  into.promptTokens += from.promptTokens;
  into.completionTokens += from.completionTokens;
  into.imageGenerations += from.imageGenerations;
  into.audioMs += from.audioMs;
  return into;
}

/** Sums events per project and minute: what a batch writes. */
export function aggregateByMinute(events: UsageEvent[]): Map<string, { minutes: Map<number, UsageCounts>; storageBytesDelta: number }> {
  const out = new Map<string, { minutes: Map<number, UsageCounts>; storageBytesDelta: number }>();
  for (const event of events) {
    let project = out.get(event.projectId);
    if (!project) out.set(event.projectId, (project = { minutes: new Map(), storageBytesDelta: 0 }));
    const minute = Math.floor(event.atMs / MINUTE_MS) * MINUTE_MS;
    let counts = project.minutes.get(minute);
    if (!counts) project.minutes.set(minute, (counts = emptyCounts()));
    addCounts(counts, event.counts);
    project.storageBytesDelta += event.storageBytesDelta;
  }
  return out;
}
