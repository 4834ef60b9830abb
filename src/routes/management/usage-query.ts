import { invalidParameter } from '../../http/errors.js';
import {
  addCounts,
  dollarsOf,
  emptyCounts,
  HOUR_MS,
  MINUTE_MS,
  normalizeCost,
  type StoredUsageBucket,
  type UsageCounts,
  type UsageDimension,
  type UsageGranularity,
  type UsageStore,
} from '../../store/usage-types.js';

export const BUCKET_WIDTHS = { '1m': MINUTE_MS, '1h': HOUR_MS, '1d': 24 * HOUR_MS } as const;
export type BucketWidth = keyof typeof BUCKET_WIDTHS;
export const GROUP_BYS = { model: 'model', api_key: 'api_key' } as const satisfies Record<string, UsageDimension>;
export type GroupBy = keyof typeof GROUP_BYS;

const DEFAULT_WINDOW_MS = 24 * HOUR_MS;
const MAX_BUCKETS = 2000;
const UNIT_MS: Record<UsageGranularity, number> = { minute: MINUTE_MS, hour: HOUR_MS };

export interface UsageQuery {
  startTime?: string;
  endTime?: string;
  bucketWidth?: BucketWidth;
  groupBy?: GroupBy;
}

export interface UsageRetentionView {
  minuteMs: number;
  hourMs: number;
}

const floorTo = (ms: number, unit: number) => Math.floor(ms / unit) * unit;
const ceilTo = (ms: number, unit: number) => Math.ceil(ms / unit) * unit;
const iso = (ms: number) => new Date(ms).toISOString();

/** The measures as the API shows them. */
function view(counts: UsageCounts) {
  return {
    requests: counts.requests,
    tokens: {
      prompt: counts.promptTokens,
      completion: counts.completionTokens,
      total: counts.promptTokens + counts.completionTokens,
      cached_prompt: counts.cachedPromptTokens,
      cache_write: counts.cacheWriteTokens,
      reasoning: counts.reasoningTokens,
    },
    image_generations: counts.imageGenerations,
    audio_seconds: counts.audioMs / 1000,
    cost: dollarsOf(counts),
    refusals: {
      requests: counts.refusedRequests,
      tokens: counts.refusedTokens,
      concurrency: counts.refusedConcurrency,
      budget: counts.refusedBudget,
    },
    errors: counts.errors,
  };
}

export interface CoveredWindow {
  granularity: UsageGranularity;
  startMs: number;
  endMs: number;
}

/**
 * The window docs/limits-and-usage.md ("Usage") answers for `[startMs, endMs)`: minute buckets when the
 * window's first minute is still kept, hour buckets otherwise; widened to the edges of the
 * buckets it overlaps (and of `widthMs`, when buckets are asked for), so every bucket
 * that overlaps it counts whole; then clipped to the retained buckets (the oldest kept
 * one to the current one). A window with nothing retained in it answers empty
 * (start = end). Retention is whole buckets back from the current one: the bucket starting
 * at `floor(now) - retention` is the oldest kept.
 */
export function coveredWindow(startMs: number, endMs: number, now: number, retention: UsageRetentionView, widthMs = 0): CoveredWindow {
  const oldestMinute = floorTo(now, MINUTE_MS) - retention.minuteMs;
  const granularity: UsageGranularity = floorTo(startMs, MINUTE_MS) >= oldestMinute ? 'minute' : 'hour';
  const unit = UNIT_MS[granularity];
  const edge = Math.max(unit, widthMs);
  const oldest = floorTo(now, unit) - (granularity === 'minute' ? retention.minuteMs : retention.hourMs);
  const start = Math.max(floorTo(startMs, edge), oldest);
  const end = Math.min(ceilTo(endMs, edge), floorTo(now, unit) + unit);
  return { granularity, startMs: start, endMs: Math.max(start, end) };
}

/**
 * Usage of `[start_time, end_time)` (defaults: end = now, start = end - 24 h) as
 * coveredWindow widens and clips it. The store reads it in one command per measure set
 * whatever its width; `group_by` reads the model or key buckets instead (one command,
 * as many rows per bucket as models or keys were used in it).
 */
export async function readUsage(store: UsageStore, projectId: string, query: UsageQuery, now: number, retention: UsageRetentionView) {
  const endMs = query.endTime === undefined ? now : Date.parse(query.endTime);
  const startMs = query.startTime === undefined ? endMs - DEFAULT_WINDOW_MS : Date.parse(query.startTime);
  if (startMs >= endMs) {
    throw invalidParameter('start_time must be earlier than end_time.', query.startTime === undefined ? 'end_time' : 'start_time');
  }
  const widthMs = query.bucketWidth === undefined ? undefined : BUCKET_WIDTHS[query.bucketWidth];
  const window = coveredWindow(startMs, endMs, now, retention, widthMs);
  if (widthMs !== undefined) {
    if (widthMs < UNIT_MS[window.granularity]) {
      throw invalidParameter(`bucket_width ${query.bucketWidth} is finer than the ${window.granularity} granularity of this window.`, 'bucket_width');
    }
    if ((window.endMs - window.startMs) / widthMs > MAX_BUCKETS) {
      throw invalidParameter(`The window holds more than ${MAX_BUCKETS} buckets of ${query.bucketWidth}; use a wider bucket_width.`, 'bucket_width');
    }
  }
  const dimension: UsageDimension = query.groupBy === undefined ? 'all' : GROUP_BYS[query.groupBy];
  const [stored, storageBytes] = await Promise.all([
    store.buckets(projectId, window.granularity, window.startMs, window.endMs, dimension),
    store.storageBytes(projectId),
  ]);
  const result: Record<string, unknown> = {
    start_time: iso(window.startMs),
    end_time: iso(window.endMs),
    ...view(sum(stored)),
    storage_bytes: storageBytes,
    granularity: window.granularity,
  };
  if (query.groupBy !== undefined) Object.assign(result, { group_by: query.groupBy, groups: groupsOf(stored, query.groupBy) });
  if (widthMs === undefined) return result;
  return { ...result, bucket_width: query.bucketWidth!, buckets: plotBuckets(stored, window, widthMs, query.groupBy) };
}

function sum(stored: StoredUsageBucket[]): UsageCounts {
  const total = emptyCounts();
  for (const bucket of stored) normalizeCost(addCounts(total, bucket.counts));
  return total;
}

/** One row per model or key that has usage in the buckets, by id (usage without one: null, last). */
function groupsOf(stored: StoredUsageBucket[], groupBy: GroupBy) {
  const byGroup = new Map<string | null, UsageCounts>();
  for (const bucket of stored) {
    let counts = byGroup.get(bucket.group);
    if (!counts) byGroup.set(bucket.group, (counts = emptyCounts()));
    normalizeCost(addCounts(counts, bucket.counts));
  }
  return [...byGroup]
    .filter(([, counts]) => Object.values(counts).some((value) => value !== 0))
    .sort(([a], [b]) => (a === null ? 1 : b === null ? -1 : a < b ? -1 : a > b ? 1 : 0))
    .map(([group, counts]) => ({ [groupBy]: group, ...view(counts) }));
}

/** Consecutive UTC-aligned buckets of `widthMs` covering the window (the window's own edges clip the first and last), empty ones included. */
function plotBuckets(stored: StoredUsageBucket[], window: CoveredWindow, widthMs: number, groupBy: GroupBy | undefined) {
  const out: Record<string, unknown>[] = [];
  let index = 0;
  for (let edge = floorTo(window.startMs, widthMs); edge < window.endMs; edge += widthMs) {
    const from = Math.max(edge, window.startMs);
    const to = Math.min(edge + widthMs, window.endMs);
    const inside: StoredUsageBucket[] = [];
    while (index < stored.length && stored[index]!.startMs < to) inside.push(stored[index++]!);
    const bucket: Record<string, unknown> = { start_time: iso(from), end_time: iso(to), ...view(sum(inside)) };
    if (groupBy !== undefined) bucket.groups = groupsOf(inside, groupBy);
    out.push(bucket);
  }
  return out;
}
