import type { RateLimits } from '../api/types.js';

export const POLICY_FIELDS: { field: keyof RateLimits; label: string; required?: boolean; step?: string }[] = [
  { field: 'requests_per_minute', label: 'Requests per minute', required: true },
  { field: 'burst_limit', label: 'Burst limit', required: true },
  { field: 'tokens_per_minute', label: 'Tokens per minute' },
  { field: 'max_concurrent_requests', label: 'Concurrent requests' },
  { field: 'daily_tokens', label: 'Daily tokens (budget)' },
  { field: 'monthly_tokens', label: 'Monthly tokens (budget)' },
  { field: 'monthly_cost', label: 'Monthly cost in USD (budget)', step: 'any' },
];

export type PolicyText = Record<keyof RateLimits, string>;

export function policyText(policy: Partial<RateLimits> | undefined): PolicyText {
  const text = {} as PolicyText;
  for (const { field } of POLICY_FIELDS) {
    const value = policy?.[field];
    text[field] = value === null || value === undefined ? '' : String(value);
  }
  return text;
}

/** Only the fields the form changed: a required field left empty is not sent. */
export function policyChanges(before: PolicyText, after: PolicyText): Partial<RateLimits> {
  const changes: Partial<RateLimits> = {};
  for (const { field, required } of POLICY_FIELDS) {
    if (before[field] === after[field]) continue;
    const text = after[field].trim();
    if (text === '' && required) continue;
    changes[field] = text === '' ? null : Number(text);
  }
  return changes;
}
