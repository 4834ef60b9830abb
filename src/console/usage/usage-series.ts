import type { BucketWidth, GroupBy, Usage, UsageGroup, UsageMeasures } from '../api/types.js';
import { bucketLabel } from './usage-windows.js';

export const MEASURES = [
  { id: 'requests', label: 'Requests' },
  { id: 'tokens', label: 'Tokens' },
  { id: 'cost', label: 'Cost (USD)' },
  { id: 'refusals', label: 'Refusals' },
  { id: 'errors', label: 'Errors' },
] as const;
export type Measure = (typeof MEASURES)[number]['id'];

/** Refusals and errors come from newer gateways: absent counts as 0. */
export function refusalsOf(measures: UsageMeasures) {
  const refusals = measures.refusals ?? {};
  const requests = refusals.requests ?? 0;
  const tokens = refusals.tokens ?? 0;
  const concurrency = refusals.concurrency ?? 0;
  const budget = refusals.budget ?? 0;
  return { requests, tokens, concurrency, budget, total: requests + tokens + concurrency + budget };
}

export function valueOf(measures: UsageMeasures, measure: Measure): number {
  switch (measure) {
    case 'requests':
      return measures.requests;
    case 'tokens':
      return measures.tokens.total;
    case 'cost':
      return measures.cost;
    case 'refusals':
      return refusalsOf(measures).total;
    case 'errors':
      return measures.errors ?? 0;
  }
}

/** Usage without a model (management calls) or key (admin records) is a group of its own. */
export function groupName(group: UsageGroup, groupBy: GroupBy): string {
  const id = groupBy === 'model' ? group.model : group.api_key;
  return id ?? (groupBy === 'model' ? '(no model)' : '(no key)');
}

export interface Series {
  rows: Record<string, number | string>[];
  groups: string[];
  /** The sum of every value the chart draws: what it shows to a reader and to the browser test. */
  total: number;
}

/** One row per bucket, one column per group, as the stacked chart draws them. */
export function toSeries(usage: Usage, groupBy: GroupBy, measure: Measure): Series {
  const width = (usage.bucket_width ?? '1h') as BucketWidth;
  const groups = new Set<string>();
  let total = 0;
  const rows = (usage.buckets ?? []).map((bucket) => {
    const row: Record<string, number | string> = { label: bucketLabel(bucket.start_time, width), start: bucket.start_time };
    const parts = bucket.groups ?? [{ ...bucket, model: null, api_key: null }];
    for (const group of parts) {
      const name = groupName(group, groupBy);
      const value = valueOf(group, measure);
      if (value === 0) continue;
      groups.add(name);
      row[name] = ((row[name] as number | undefined) ?? 0) + value;
      total += value;
    }
    return row;
  });
  return { rows, groups: [...groups].sort(), total };
}

const costFormat = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumSignificantDigits: 4 });
const countFormat = new Intl.NumberFormat('en-US');

export const formatCost = (value: number) => costFormat.format(value);
export const formatCount = (value: number) => countFormat.format(value);
export const formatMeasure = (value: number, measure: Measure) => (measure === 'cost' ? formatCost(value) : formatCount(value));
