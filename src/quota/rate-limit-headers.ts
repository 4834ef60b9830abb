import type { Admitted } from './admission.js';
import type { ManagementDecision } from './management-limit.js';

/** `250ms`, `1s`, `1.5s`, `6m0s`: the duration format of OpenAI's x-ratelimit-reset-* headers. */
export function formatDuration(ms: number): string {
  const value = Math.max(0, Math.ceil(ms));
  if (value < 1000) return `${value}ms`;
  if (value < 60_000) return `${Number((value / 1000).toFixed(3))}s`;
  const minutes = Math.floor(value / 60_000);
  return `${minutes}m${Number(((value - minutes * 60_000) / 1000).toFixed(3))}s`;
}

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000));

/**
 * The rate-limit response fields. x-ratelimit-* describe the rolling window
 * (limit = requests_per_minute, remaining in the window, time until the window is empty);
 * the IETF fields (draft-ietf-httpapi-ratelimit-headers) list both policies:
 * "requests" (the rolling window) and "burst" (the burst allowance).
 */
export function rateLimitHeaders(decision: Admitted, windowSeconds: number, burstWindowSeconds: number): Record<string, string> {
  const { policy } = decision;
  const window = Math.max(1, Math.round(windowSeconds));
  const burstWindow = Math.max(1, Math.round(burstWindowSeconds));
  return {
    'x-ratelimit-limit-requests': String(policy.requests_per_minute),
    'x-ratelimit-remaining-requests': String(decision.remaining),
    'x-ratelimit-reset-requests': formatDuration(decision.resetMs),
    'ratelimit-policy': `"requests";q=${policy.requests_per_minute};w=${window}, "burst";q=${policy.burst_limit};w=${burstWindow}`,
    ratelimit: `"requests";r=${decision.remaining};t=${seconds(decision.resetMs)}, "burst";r=${decision.burstRemaining};t=${seconds(decision.burstResetMs)}`,
  };
}

/**
 * Management routes answer with their own limit: x-ratelimit-*-requests describe the management
 * window, and the IETF fields name it "management" so a client can tell it from the model policy.
 */
export function managementLimitHeaders(decision: ManagementDecision, windowSeconds: number): Record<string, string> {
  const window = Math.max(1, Math.round(windowSeconds));
  return {
    'x-ratelimit-limit-requests': String(decision.limit),
    'x-ratelimit-remaining-requests': String(decision.remaining),
    'x-ratelimit-reset-requests': formatDuration(decision.resetMs),
    'ratelimit-policy': `"management";q=${decision.limit};w=${window}`,
    ratelimit: `"management";r=${decision.remaining};t=${seconds(decision.resetMs)}`,
  };
}
