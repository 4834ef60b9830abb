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
