import type { Admitted } from './admission.js';
import type { ManagementDecision } from './management-limit.js';
import type { RateLimitPolicy } from '../store/types.js';

/** `250ms`, `1s`, `1.5s`, `6m0s`: the duration format of OpenAI's x-ratelimit-reset-* headers. */
export function formatDuration(ms: number): string {
  const value = Math.max(0, Math.ceil(ms));
  if (value < 1000) return `${value}ms`;
  if (value < 60_000) return `${Number((value / 1000).toFixed(3))}s`;
  const minutes = Math.floor(value / 60_000);
  return `${minutes}m${Number(((value - minutes * 60_000) / 1000).toFixed(3))}s`;
}

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000));

/** What the headers say of a policy alone (its limits and windows): made once per policy object. */
interface PolicyText {
  window: number;
  burstWindow: number;
  requestsLimit: string;
  tokensLimit: string | null;
  /** The `ratelimit-policy` field. */
  policies: string;
}

const policyTexts = new WeakMap<RateLimitPolicy, PolicyText>();

function policyTextOf(policy: RateLimitPolicy, window: number, burstWindow: number): PolicyText {
  const known = policyTexts.get(policy);
  if (known !== undefined && known.window === window && known.burstWindow === burstWindow) return known;
  let policies = `"requests";q=${policy.requests_per_minute};w=${window}, "burst";q=${policy.burst_limit};w=${burstWindow}`;
  if (policy.tokens_per_minute !== null) policies += `, "tokens";q=${policy.tokens_per_minute};w=${window}`;
  // No window: a slot frees when a request ends.
  if (policy.max_concurrent_requests !== null) policies += `, "concurrency";q=${policy.max_concurrent_requests}`;
  const text: PolicyText = {
    window,
    burstWindow,
    requestsLimit: String(policy.requests_per_minute),
    tokensLimit: policy.tokens_per_minute === null ? null : String(policy.tokens_per_minute),
    policies,
  };
  policyTexts.set(policy, text);
  return text;
}

/** One window as the headers show it. */
interface ShownWindow {
  limit: number;
  remaining: number;
  resetMs: number;
}

/**
 * The request and token windows the headers show, of two levels the tighter (fewer left; the refusing
 * level on a refusal), and the level x-ratelimit-scope names: the one that refused, else the one the
 * request window shows.
 */
function shownWindows(decision: Admitted): { requests: ShownWindow; tokens: ShownWindow | null; scope: 'key' | 'project' } {
  const { policy } = decision;
  let requests: ShownWindow = { limit: policy.requests_per_minute, remaining: decision.remaining, resetMs: decision.resetMs };
  let tokens: ShownWindow | null =
    policy.tokens_per_minute === null ? null : { limit: policy.tokens_per_minute, remaining: decision.tokensRemaining, resetMs: decision.tokensResetMs };
  let scope: 'key' | 'project' = decision.level ?? 'project';
  const key = decision.key;
  if (key) {
    const { requests_per_minute: rpm, tokens_per_minute: tpm } = key.policy;
    const keyRequests = rpm !== null && (decision.level === 'key' ? decision.refusedBy === 'requests' || key.remaining < decision.remaining : decision.level !== 'project' && key.remaining < decision.remaining);
    if (keyRequests) {
      requests = { limit: rpm, remaining: key.remaining, resetMs: key.resetMs };
      if (decision.level === null || decision.level === undefined) scope = 'key';
    }
    if (tpm !== null && (tokens === null || key.tokensRemaining < decision.tokensRemaining || (decision.level === 'key' && decision.refusedBy === 'tokens'))) {
      tokens = { limit: tpm, remaining: key.tokensRemaining, resetMs: key.tokensResetMs };
    }
  }
  return { requests, tokens, scope };
}

/**
 * The rate-limit response fields. x-ratelimit-*-requests describe the rolling window
 * (limit = requests_per_minute, remaining in the window, time until the window is empty), and with
 * a token rate x-ratelimit-*-tokens the token window (OpenAI's names); with a key's own limits, of
 * the two levels the tighter. The IETF fields (draft-ietf-httpapi-ratelimit-headers) list one entry
 * per active policy: "requests" (the rolling window), "burst" (the burst allowance), "tokens" and
 * "concurrency" when the project has them, and "key-requests", "key-tokens", "key-concurrency" for
 * the key's own. Admission keeps a project's policy object while its values stay the same, so the
 * policy's part of the text is made once.
 */
export function rateLimitHeaders(decision: Admitted, windowSeconds: number, burstWindowSeconds: number): Record<string, string> {
  const window = Math.max(1, Math.round(windowSeconds));
  const headers = projectRateLimitHeaders(decision, window, Math.max(1, Math.round(burstWindowSeconds)));
  const key = decision.key;
  if (!key && decision.allowed) return headers;
  const { requests, tokens, scope } = shownWindows(decision);
  headers['x-ratelimit-limit-requests'] = String(requests.limit);
  headers['x-ratelimit-remaining-requests'] = String(requests.remaining);
  headers['x-ratelimit-reset-requests'] = formatDuration(requests.resetMs);
  if (tokens !== null) {
    headers['x-ratelimit-limit-tokens'] = String(tokens.limit);
    headers['x-ratelimit-remaining-tokens'] = String(tokens.remaining);
    headers['x-ratelimit-reset-tokens'] = formatDuration(tokens.resetMs);
  }
  if (key) {
    const { requests_per_minute: rpm, tokens_per_minute: tpm, max_concurrent_requests: maxc } = key.policy;
    let policies = '';
    let states = '';
    if (rpm !== null) {
      policies += `, "key-requests";q=${rpm};w=${window}`;
      states += `, "key-requests";r=${key.remaining};t=${seconds(key.resetMs)}`;
    }
    if (tpm !== null) {
      policies += `, "key-tokens";q=${tpm};w=${window}`;
      states += `, "key-tokens";r=${key.tokensRemaining};t=${seconds(key.tokensResetMs)}`;
    }
    if (maxc !== null) {
      policies += `, "key-concurrency";q=${maxc}`;
      states += `, "key-concurrency";r=${Math.max(0, maxc - key.inFlight)}`;
    }
    headers['ratelimit-policy'] += policies;
    headers.ratelimit += states;
  }
  headers['x-ratelimit-scope'] = scope;
  return headers;
}

function projectRateLimitHeaders(decision: Admitted, window: number, burstWindow: number): Record<string, string> {
  const { policy } = decision;
  const text = policyTextOf(policy, window, burstWindow);
  let states = `"requests";r=${decision.remaining};t=${seconds(decision.resetMs)}, "burst";r=${decision.burstRemaining};t=${seconds(decision.burstResetMs)}`;
  const headers: Record<string, string> = {
    'x-ratelimit-limit-requests': text.requestsLimit,
    'x-ratelimit-remaining-requests': String(decision.remaining),
    'x-ratelimit-reset-requests': formatDuration(decision.resetMs),
  };
  if (text.tokensLimit !== null) {
    headers['x-ratelimit-limit-tokens'] = text.tokensLimit;
    headers['x-ratelimit-remaining-tokens'] = String(decision.tokensRemaining);
    headers['x-ratelimit-reset-tokens'] = formatDuration(decision.tokensResetMs);
    states += `, "tokens";r=${decision.tokensRemaining};t=${seconds(decision.tokensResetMs)}`;
  }
  if (policy.max_concurrent_requests !== null) states += `, "concurrency";r=${Math.max(0, policy.max_concurrent_requests - decision.inFlight)}`;
  headers['ratelimit-policy'] = text.policies;
  headers.ratelimit = states;
  return headers;
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

/**
 * Anthropic's names for the same windows (`anthropic-ratelimit-*`, reset as an RFC 3339 time), sent
 * beside nova's own on Messages requests so Anthropic's tools read them: the tighter level's, as
 * x-ratelimit-* show.
 */
export function anthropicRateLimitHeaders(decision: Admitted, nowMs: number): Record<string, string> {
  const { requests, tokens } = shownWindows(decision);
  const headers: Record<string, string> = {
    'anthropic-ratelimit-requests-limit': String(requests.limit),
    'anthropic-ratelimit-requests-remaining': String(requests.remaining),
    'anthropic-ratelimit-requests-reset': new Date(nowMs + Math.max(0, requests.resetMs)).toISOString(),
  };
  if (tokens !== null) {
    headers['anthropic-ratelimit-tokens-limit'] = String(tokens.limit);
    headers['anthropic-ratelimit-tokens-remaining'] = String(tokens.remaining);
    headers['anthropic-ratelimit-tokens-reset'] = new Date(nowMs + Math.max(0, tokens.resetMs)).toISOString();
  }
  return headers;
}
