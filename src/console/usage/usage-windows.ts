import type { BucketWidth, GroupBy, UsageQuery } from '../api/types.js';

/** The windows the charts offer, each with a bucket width that stays well within the API's 2000-bucket cap. */
export const WINDOWS = [
  { id: '1h', label: '1 hour', ms: 3_600_000, bucket: '1m' },
  { id: '24h', label: '24 hours', ms: 86_400_000, bucket: '1h' },
  { id: '7d', label: '7 days', ms: 7 * 86_400_000, bucket: '1h' },
  { id: '30d', label: '30 days', ms: 30 * 86_400_000, bucket: '1d' },
] as const satisfies readonly { id: string; label: string; ms: number; bucket: BucketWidth }[];

export type WindowId = (typeof WINDOWS)[number]['id'];

const BUCKET_MS: Record<BucketWidth, number> = { '1m': 60_000, '1h': 3_600_000, '1d': 86_400_000 };

/** The window ending at the end of the current bucket, so the newest requests are in it. */
export function usageQuery(windowId: WindowId, groupBy: GroupBy, now = Date.now()): UsageQuery {
  const window = WINDOWS.find((candidate) => candidate.id === windowId) ?? WINDOWS[0];
  const width = BUCKET_MS[window.bucket];
  const end = Math.ceil((now + 1) / width) * width;
  return {
    start_time: new Date(end - window.ms).toISOString(),
    end_time: new Date(end).toISOString(),
    bucket_width: window.bucket,
    group_by: groupBy,
  };
}

export function bucketLabel(iso: string, width: BucketWidth): string {
  const date = new Date(iso);
  if (width === '1d') return date.toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
  const time = date.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  return width === '1h' && Date.now() - date.getTime() > 86_400_000 ? `${date.toLocaleDateString(undefined, { month: 'short', day: 'numeric' })} ${time}` : time;
}
