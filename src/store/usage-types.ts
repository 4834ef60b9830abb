import type { ModelLimitKind, SettleFence } from './quota-types.js';

/** The usage part of the Store (docs/limits-and-usage.md, "Usage"): bucketed measures per project, model and key. */

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;

/** Cost is kept as an exact fixed-point sum: whole micro-dollars plus the rest in 1e-18 dollars. */
export const ATTO_PER_MICRO = 1_000_000_000_000;

/** The measures a usage bucket holds (storage is a running total, not bucketed). All integers. */
export interface UsageCounts {
  requests: number;
  promptTokens: number;
  completionTokens: number;
  imageGenerations: number;
  audioMs: number;
  /** Whole micro-dollars of cost. */
  costMicros: number;
  /** The rest of the cost in 1e-18 dollars (below ATTO_PER_MICRO per event; sums may exceed it). */
  costAtto: number;
  /** Of promptTokens, read from the upstream's prompt cache. */
  cachedPromptTokens: number;
  /** Of promptTokens, written to the upstream's prompt cache. */
  cacheWriteTokens: number;
  /** Of completionTokens, spent on reasoning. */
  reasoningTokens: number;
  /** Model requests refused by a limit of that kind (not in `requests`, which counts admitted ones). */
  refusedRequests: number;
  refusedTokens: number;
  refusedConcurrency: number;
  refusedBudget: number;
  /** Admitted model requests that ended in an error answer (docs/limits-and-usage.md, "Usage"). */
  errors: number;
}

/** The refusal measure of each limit kind. */
export const REFUSAL_COUNTS = {
  requests: 'refusedRequests',
  tokens: 'refusedTokens',
  concurrency: 'refusedConcurrency',
  budget: 'refusedBudget',
} as const satisfies Record<ModelLimitKind, keyof UsageCounts>;

/** How a bucket is split: not at all, per public model id, per API key id. */
export type UsageDimension = 'all' | 'model' | 'api_key';
export const USAGE_DIMENSIONS: readonly UsageDimension[] = ['all', 'model', 'api_key'];

/** One usage increment (one request's admission, or what the request consumed). */
export interface UsageEvent {
  projectId: string;
  /** `<request id>:<part>`: the meter drops a second record of the same id. */
  eventId: string;
  atMs: number;
  counts: UsageCounts;
  storageBytesDelta: number;
  model: string | null;
  apiKeyId: string | null;
  /** The dimensions the event counts in (default all three): a request moved to its model counts only in 'model'. */
  dimensions?: readonly UsageDimension[];
  /** What the budget counters still miss of this request (written with the usage, once). */
  budget?: BudgetCorrection;
}

/**
 * A change to a project's budget counters, or to a key's own (`keyId`), that the quota store could
 * not make when the request ended (admitted by the per-replica fallback, or its settlement
 * unanswered): it rides on the usage records, which are written exactly once, and apply-usage.lua
 * adds it like quota-batch.lua's settlement.
 */
export interface BudgetCorrection {
  /** The key whose own budgets it corrects; absent: the project's. */
  keyId?: string;
  /** The budget periods it belongs to (`YYYY-MM-DD`, `YYYY-MM`); a period that is over is left alone. */
  day: string;
  month: string;
  /** Added to the daily and monthly token counters and the monthly cost counter (negative: reserved, not used). */
  dayTokens: number;
  monthTokens: number;
  monthCost: number;
  /** What the request really used, added to the settled sums of the budgets it was charged to (the alerts' measure; 0: none). */
  settledDayTokens: number;
  settledMonthTokens: number;
  settledMonthCost: number;
  /** The settlement may still reach the store: the correction counts only if it did not, and then fences it off. */
  fence?: SettleFence;
}

export interface UsageRetention {
  minuteMs: number;
  hourMs: number;
  /** How long a batch id is remembered, so a retried batch cannot count twice. */
  /** How long a replica's high-water mark outlives its last write to a project. */
  dedupMs: number;
}

export type UsageGranularity = 'minute' | 'hour';

export interface StoredUsageBucket {
  startMs: number;
  /** The model or key id of a split bucket; null for the whole project, or for usage without one. */
  group: string | null;
  counts: UsageCounts;
}

/**
 * Where a batch stands in its replica's stream of writes. A replica writes one batch at a time
 * and retries it, unchanged, until it is written; so (seq, sub) only grows, and the store keeps,
 * per project and replica, the highest it applied: a high-water mark, not a key per batch.
 */
export interface BatchRef {
  /** The writing replica's id (random per process). */
  replica: string;
  /** The batch's number in the replica's stream. */
  seq: number;
  /** Orders the writes within one batch (a refused batch is rewritten record by record). */
  sub: number;
}

export interface UsageStore {
  /**
   * Applies a batch at most once: a batch whose first attempt timed out, but may have run, is
   * retried with the same ref and the same events and does not count twice. A replica's mark is
   * forgotten `dedupMs` after its last write to the project. Returns the projects' storage totals.
   */
  apply(batch: BatchRef, events: UsageEvent[], retention: UsageRetention): Promise<Map<string, number>>;
  /**
   * Non-empty buckets of the granularity and dimension whose start lies in [startMs, endMs),
   * oldest first: a fixed number of store commands whatever the window (the work grows
   * with the buckets that exist in it, which retention bounds).
   */
  buckets(projectId: string, granularity: UsageGranularity, startMs: number, endMs: number, dimension?: UsageDimension): Promise<StoredUsageBucket[]>;
  /** What the project stores now, after freeing what expired (see trackExpiry). */
  storageBytes(projectId: string): Promise<number>;
}

export const emptyCounts = (): UsageCounts => ({
  requests: 0,
  promptTokens: 0,
  completionTokens: 0,
  imageGenerations: 0,
  audioMs: 0,
  costMicros: 0,
  costAtto: 0,
  cachedPromptTokens: 0,
  cacheWriteTokens: 0,
  reasoningTokens: 0,
  refusedRequests: 0,
  refusedTokens: 0,
  refusedConcurrency: 0,
  refusedBudget: 0,
  errors: 0,
});

export function addCounts(into: UsageCounts, from: UsageCounts): UsageCounts {
  into.requests += from.requests;
  into.promptTokens += from.promptTokens;
  into.completionTokens += from.completionTokens;
  into.imageGenerations += from.imageGenerations;
  into.audioMs += from.audioMs;
  into.costMicros += from.costMicros;
  into.costAtto += from.costAtto;
  into.cachedPromptTokens += from.cachedPromptTokens;
  into.cacheWriteTokens += from.cacheWriteTokens;
  into.reasoningTokens += from.reasoningTokens;
  into.refusedRequests += from.refusedRequests;
  into.refusedTokens += from.refusedTokens;
  into.refusedConcurrency += from.refusedConcurrency;
  into.refusedBudget += from.refusedBudget;
  into.errors += from.errors;
  return into;
}

/** Moves whole micro-dollars out of costAtto, so the sums stay far below 2^53. */
export function normalizeCost(counts: UsageCounts): UsageCounts {
  if (counts.costAtto >= ATTO_PER_MICRO) {
    const carry = Math.floor(counts.costAtto / ATTO_PER_MICRO);
    counts.costMicros += carry;
    counts.costAtto -= carry * ATTO_PER_MICRO;
  }
  return counts;
}

/** The cost in dollars: exact sums, one rounding at the end. */
export const dollarsOf = (counts: UsageCounts): number => counts.costMicros / 1e6 + counts.costAtto / 1e18;

/** A dollar amount as the fixed-point parts (exact to the double's own precision). */
export function costParts(dollars: number): Pick<UsageCounts, 'costMicros' | 'costAtto'> {
  if (!(dollars > 0)) return { costMicros: 0, costAtto: 0 };
  const scaled = Math.round(dollars * 1e18);
  if (scaled <= Number.MAX_SAFE_INTEGER) {
    // Below 2^53 (under about $0.009, a request's usual cost) doubles do it exactly, without
    // BigInt's allocations: the quotient is below 9,008, where the division's rounding (half an
    // ulp, under 1e-12) cannot reach the next integer (at least 1e-12 away), so its floor is exact,
    // and so is the remainder (integers below 2^53).
    const micros = Math.floor(scaled / ATTO_PER_MICRO);
    return { costMicros: micros, costAtto: scaled - micros * ATTO_PER_MICRO };
  }
  const atto = BigInt(scaled);
  const micros = atto / BigInt(ATTO_PER_MICRO);
  return { costMicros: Number(micros), costAtto: Number(atto - micros * BigInt(ATTO_PER_MICRO)) };
}

export interface AggregatedUsage {
  dimension: UsageDimension;
  group: string | null;
  minuteMs: number;
  counts: UsageCounts;
}

/** What a batch writes of one project. */
export interface ProjectUsage {
  entries: AggregatedUsage[];
  storageBytesDelta: number;
  budgets: BudgetCorrection[];
}

interface ProjectSums {
  /** In the order they were first seen. */
  entries: AggregatedUsage[];
  storageBytesDelta: number;
  budgets: Map<string, BudgetCorrection>;
  /** The entries by dimension, minute and group ('' for none): nested Maps, so that no key string is built per event. */
  index: Map<UsageDimension, Map<number, Map<string, AggregatedUsage>>>;
}

/** Sums a batch's events per project, dimension, group and minute: what a batch writes. */
export function aggregateUsage(events: UsageEvent[]): Map<string, ProjectUsage> {
  const out = new Map<string, ProjectSums>();
  for (const event of events) {
    let project = out.get(event.projectId);
    if (!project) out.set(event.projectId, (project = { entries: [], storageBytesDelta: 0, index: new Map(), budgets: new Map() }));
    project.storageBytesDelta += event.storageBytesDelta;
    if (event.budget) addCorrection(project.budgets, event.budget);
    const minuteMs = Math.floor(event.atMs / MINUTE_MS) * MINUTE_MS;
    for (const dimension of event.dimensions ?? USAGE_DIMENSIONS) {
      const group = dimension === 'model' ? event.model : dimension === 'api_key' ? event.apiKeyId : null;
      let minutes = project.index.get(dimension);
      if (!minutes) project.index.set(dimension, (minutes = new Map()));
      let groups = minutes.get(minuteMs);
      if (!groups) minutes.set(minuteMs, (groups = new Map()));
      let entry = groups.get(group ?? '');
      if (!entry) {
        groups.set(group ?? '', (entry = { dimension, group, minuteMs, counts: emptyCounts() }));
        project.entries.push(entry);
      }
      normalizeCost(addCounts(entry.counts, event.counts));
    }
  }
  const sums = new Map<string, ProjectUsage>();
  for (const [projectId, { entries, storageBytesDelta, budgets }] of out) sums.set(projectId, { entries, storageBytesDelta, budgets: [...budgets.values()] });
  return sums;
}

/** Corrections of one subject (the project or a key), period and fenced settlement (or of none) add up into one. */
function addCorrection(into: Map<string, BudgetCorrection>, correction: BudgetCorrection): void {
  const { keyId, day, month, fence } = correction;
  const key = `${keyId ?? ''}|${day}|${month}|${fence ? `${fence.replica}|${fence.seq}` : ''}`;
  const sum = into.get(key);
  if (sum === undefined) into.set(key, { ...correction });
  else {
    sum.dayTokens += correction.dayTokens;
    sum.monthTokens += correction.monthTokens;
    sum.monthCost += correction.monthCost;
    sum.settledDayTokens += correction.settledDayTokens;
    sum.settledMonthTokens += correction.settledMonthTokens;
    sum.settledMonthCost += correction.settledMonthCost;
  }
}
