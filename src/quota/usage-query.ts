import { invalidParameter } from '../http/errors.js';
import { addCounts, emptyCounts, HOUR_MS, MINUTE_MS, type UsageCounts, type UsageGranularity, type UsageStore } from '../store/usage-types.js';

export const BUCKET_WIDTHS = { '1m': MINUTE_MS, '1h': HOUR_MS, '1d': 24 * HOUR_MS } as const;
export type BucketWidth = keyof typeof BUCKET_WIDTHS;

const DEFAULT_WINDOW_MS = 24 * HOUR_MS;
const MAX_BUCKETS = 2000;

export interface UsageQuery {
  startTime?: string;
  endTime?: string;
  bucketWidth?: BucketWidth;
}

/** The measures as the API shows them. */
function view(counts: UsageCounts) {
  return {
    requests: counts.requests,
    tokens: { prompt: counts.promptTokens, completion: counts.completionTokens, total: counts.promptTokens + counts.completionTokens },
    image_generations: counts.imageGenerations,
    audio_seconds: counts.audioMs / 1000,
  };
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * Usage of `[start_time, end_time)`. Events are kept in buckets (a minute for
 * minute_retention, an hour for hour_retention); a bucket belongs to the window when its
 * start lies in it, so the window's edges are exact at bucket edges. Minute buckets answer
 * when the window starts within their retention, hour buckets otherwise: `granularity`.
 * Defaults: end_time = now, start_time = end_time - 24 h.
 */
export async function readUsage(store: UsageStore, projectId: string, query: UsageQuery, now: number, minuteRetentionMs: number) {
  const endMs = query.endTime === undefined ? now : Date.parse(query.endTime);
  const startMs = query.startTime === undefined ? endMs - DEFAULT_WINDOW_MS : Date.parse(query.startTime);
  if (startMs >= endMs) {
    throw invalidParameter('start_time must be earlier than end_time.', query.startTime === undefined ? 'end_time' : 'start_time');
  }
  const granularity: UsageGranularity = startMs >= now - minuteRetentionMs ? 'minute' : 'hour';
  const unit = granularity === 'minute' ? MINUTE_MS : HOUR_MS;
  let widthMs: number | undefined;
  if (query.bucketWidth !== undefined) {
    widthMs = BUCKET_WIDTHS[query.bucketWidth];
    if (widthMs < unit) {
      throw invalidParameter(`bucket_width ${query.bucketWidth} is finer than the ${granularity} granularity of this window.`, 'bucket_width');
    }
    if ((Math.ceil(endMs / widthMs) - Math.floor(startMs / widthMs)) > MAX_BUCKETS) {
      throw invalidParameter(`The window holds more than ${MAX_BUCKETS} buckets of ${query.bucketWidth}; use a wider bucket_width.`, 'bucket_width');
    }
  }
  const [stored, storageBytes] = await Promise.all([store.buckets(projectId, granularity, startMs, endMs), store.storageBytes(projectId)]);
  const total = emptyCounts();
  stored.forEach((bucket) => addCounts(total, bucket.counts));
  const result = {
    start_time: iso(startMs),
    end_time: iso(endMs),
    ...view(total),
    storage_bytes: storageBytes,
    granularity,
  };
  if (widthMs === undefined) return result;
  return { ...result, bucket_width: query.bucketWidth!, buckets: plotBuckets(stored, startMs, endMs, widthMs) };
}

/** Buckets of `widthMs` aligned to UTC, covering the window (the first and last clipped to it). */
function plotBuckets(stored: { startMs: number; counts: UsageCounts }[], startMs: number, endMs: number, widthMs: number) {
  const out: ({ start_time: string; end_time: string } & ReturnType<typeof view>)[] = [];
  let index = 0;
  for (let edge = Math.floor(startMs / widthMs) * widthMs; edge < endMs; edge += widthMs) {
    const from = Math.max(edge, startMs);
    const to = Math.min(edge + widthMs, endMs);
    const counts = emptyCounts();
    while (index < stored.length && stored[index]!.startMs < to) addCounts(counts, stored[index++]!.counts);
    out.push({ start_time: iso(from), end_time: iso(to), ...view(counts) });
  }
  return out;
}
