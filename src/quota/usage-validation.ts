import { REFUSAL_COUNTS, type UsageCounts } from '../store/usage-types.js';
import type { UsageRecord } from './usage-meter.js';

/**
 * Caps of one request's report: far above anything real, far below what breaks an int64
 * sum in the store (or a double sum in a reader) over years of buckets.
 */
export const USAGE_CAPS = {
  requests: 1,
  errors: 1,
  promptTokens: 1_000_000_000,
  completionTokens: 1_000_000_000,
  /** Parts of promptTokens / completionTokens: also at most their whole. */
  cachedPromptTokens: 1_000_000_000,
  cacheWriteTokens: 1_000_000_000,
  reasoningTokens: 1_000_000_000,
  imageGenerations: 100_000,
  /** Seconds: 30 days of audio. */
  audioSeconds: 30 * 86_400,
  /** Bytes either way: 1 TiB. */
  storageBytesDelta: 2 ** 40,
  /** Dollars. */
  cost: 1_000_000,
} as const;

/** A finite number (an integer when `integer`) from 0 to `cap`, or from -cap to cap when `signed`. */
function isWithinCap(value: unknown, cap: number, integer: boolean, signed = false): value is number {
  return (
    typeof value === 'number' &&
    Number.isFinite(value) &&
    (!integer || Number.isInteger(value)) &&
    (signed ? Math.abs(value) <= cap : value >= 0 && value <= cap)
  );
}

/** `value` when it is a number a usage record would take (see validUsage), else 0. */
export function withinCap(value: number, cap: number, integer: boolean): number {
  return isWithinCap(value, cap, integer) ? value : 0;
}

export interface InvalidUsageValue {
  field: keyof typeof USAGE_CAPS;
  value: unknown;
}

export interface ValidUsage {
  counts: Omit<UsageCounts, 'costMicros' | 'costAtto'>;
  cost: number;
  storageBytesDelta: number;
  /** Values refused (each counted as 0; the rest of the record stands). */
  invalid: InvalidUsageValue[];
}

/**
 * The numbers of a record as the store may add them: counts are non-negative integers
 * under their cap, audio seconds and cost non-negative finite numbers under theirs, the
 * storage change an integer within its cap either way. Anything else (1e300, NaN, -3, 1.5
 * tokens, a string) is refused value by value, so one bad number never costs the others. The
 * cached, cache-write and reasoning tokens are parts of the prompt and completion tokens: parts that
 * add up to more than their whole are refused, so no bucket shows more cached tokens than prompt tokens.
 */
export function validUsage(record: UsageRecord): ValidUsage {
  const invalid: InvalidUsageValue[] = [];
  const take = (field: keyof typeof USAGE_CAPS, value: unknown, integer: boolean, signed = false): number => {
    if (value === undefined || value === null) return 0;
    if (isWithinCap(value, USAGE_CAPS[field], integer, signed)) return value;
    invalid.push({ field, value });
    return 0;
  };
  const promptTokens = take('promptTokens', record.promptTokens, true);
  const completionTokens = take('completionTokens', record.completionTokens, true);
  let cachedPromptTokens = take('cachedPromptTokens', record.cachedPromptTokens, true);
  let cacheWriteTokens = take('cacheWriteTokens', record.cacheWriteTokens, true);
  let reasoningTokens = take('reasoningTokens', record.reasoningTokens, true);
  if (cachedPromptTokens + cacheWriteTokens > promptTokens) {
    // Which part is wrong cannot be told: both go.
    if (cachedPromptTokens > 0) invalid.push({ field: 'cachedPromptTokens', value: cachedPromptTokens });
    if (cacheWriteTokens > 0) invalid.push({ field: 'cacheWriteTokens', value: cacheWriteTokens });
    cachedPromptTokens = cacheWriteTokens = 0;
  }
  if (reasoningTokens > completionTokens) {
    invalid.push({ field: 'reasoningTokens', value: reasoningTokens });
    reasoningTokens = 0;
  }
  const refused = record.refusedBy === undefined ? undefined : REFUSAL_COUNTS[record.refusedBy];
  return {
    counts: {
      requests: take('requests', record.requests, true),
      refusedRequests: refused === 'refusedRequests' ? 1 : 0,
      refusedTokens: refused === 'refusedTokens' ? 1 : 0,
      refusedConcurrency: refused === 'refusedConcurrency' ? 1 : 0,
      refusedBudget: refused === 'refusedBudget' ? 1 : 0,
      errors: take('errors', record.errors, true),
      promptTokens,
      completionTokens,
      imageGenerations: take('imageGenerations', record.imageGenerations, true),
      audioMs: Math.round(take('audioSeconds', record.audioSeconds, false) * 1000),
      cachedPromptTokens,
      cacheWriteTokens,
      reasoningTokens,
    },
    cost: take('cost', record.cost, false),
    storageBytesDelta: take('storageBytesDelta', record.storageBytesDelta, true, true),
    invalid,
  };
}
