import { BurstyRateLimiter, RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { needsSettling, type KeyLimits, type AdmissionDecision, type Reservation, type Settlement } from '../store/quota-types.js';
import type { RateLimitPolicy } from '../store/types.js';

const MAX_POLICIES = 1000;

/**
 * Admission while Redis is unreachable: each replica limits on its own to `share` of the
 * project's policy, with rate-limiter-flexible's in-memory limiters (a fixed window for
 * requests_per_minute composed with a burst limiter, BurstyRateLimiter; a fixed window of
 * tokens_per_minute, reserved and settled like the shared one) and an in-process count of requests
 * in flight against `share` of max_concurrent_requests. Approximate by design: it only has to keep
 * a project near its policy until Redis is back. Budgets are the caller's (fail open or closed).
 */
export class FallbackLimiter {
  private readonly requestLimiters = new Map<string, BurstyRateLimiter>();
  private readonly tokenLimiters = new Map<number, RateLimiterMemory>();
  private readonly inFlight = new Map<string, number>();

  constructor(
    private readonly share: number,
    private readonly windowSeconds: number,
    private readonly burstWindowSeconds: number,
  ) {}

  /** `projectId`: the level's id (a project, or a key with limits of its own: src/quota/admission.ts). */
  async admit(projectId: string, policy: KeyLimits, request: { id: string; tokens: number; day: string; month: string }): Promise<AdmissionDecision> {
    // A key level's limits stand in for a policy here; the caller gives it its own figures.
    const decision = { ...refusedDecision(policy as RateLimitPolicy), inFlight: this.inFlight.get(projectId) ?? 0 };
    const { tokens_per_minute: tpm, max_concurrent_requests: maxc } = policy;
    if (maxc !== null && decision.inFlight >= Math.max(1, Math.floor(maxc * this.share))) {
      return { ...decision, refusedBy: 'concurrency', retryAfterMs: 1000 };
    }
    const tokenLimiter = tpm === null ? undefined : this.tokenLimiterFor(Math.max(1, Math.floor(tpm * this.share)));
    if (tokenLimiter && request.tokens > 0) {
      const res = await settle(tokenLimiter.consume(projectId, request.tokens));
      decision.tokensRemaining = Math.max(0, res.result.remainingPoints);
      decision.tokensResetMs = res.result.msBeforeNext;
      if (!res.allowed) {
        // A refusal costs nothing: give the points back.
        await tokenLimiter.reward(projectId, request.tokens);
        return { ...decision, refusedBy: 'tokens', retryAfterMs: Math.max(1, res.result.msBeforeNext) };
      }
    }
    // A key level without a request rate: no request limiter.
    const requests = policy.requests_per_minute === null ? null : await settle(this.requestLimiterFor(policy.requests_per_minute, policy.burst_limit ?? 0).consume(projectId));
    if (requests) {
      decision.remaining = Math.max(0, requests.result.remainingPoints);
      decision.resetMs = requests.result.msBeforeNext;
    }
    if (requests && !requests.allowed) {
      if (tokenLimiter && request.tokens > 0) await tokenLimiter.reward(projectId, request.tokens);
      return { ...decision, refusedBy: 'requests', retryAfterMs: Math.max(1, requests.result.msBeforeNext) };
    }
    if (maxc !== null) this.inFlight.set(projectId, ++decision.inFlight);
    const reservation: Reservation = {
      id: request.id,
      slot: 0,
      rateTokens: tokenLimiter ? request.tokens : null,
      // Budgets charged nothing here: what the request uses goes to them with its usage record (admission.ts settle).
      dayTokens: policy.daily_tokens === null ? null : 0,
      monthTokens: policy.monthly_tokens === null ? null : 0,
      monthCost: policy.monthly_cost === null ? null : 0,
      day: request.day,
      month: request.month,
      lease: maxc !== null,
      local: true,
    };
    return { ...decision, allowed: true, reservation: needsSettling(reservation) ? reservation : null };
  }

  /** The request ended: the token charge becomes its real usage, its slot frees. */
  async settle(projectId: string, policy: KeyLimits | undefined, reservation: Reservation, used: Settlement): Promise<void> {
    if (reservation.lease) {
      const count = (this.inFlight.get(projectId) ?? 1) - 1;
      if (count > 0) this.inFlight.set(projectId, count);
      else this.inFlight.delete(projectId);
    }
    const tpm = policy?.tokens_per_minute;
    if (reservation.rateTokens === null || tpm === null || tpm === undefined) return;
    const limiter = this.tokenLimiterFor(Math.max(1, Math.floor(tpm * this.share)));
    const delta = used.tokens - reservation.rateTokens;
    if (delta < 0) await limiter.reward(projectId, -delta);
    else if (delta > 0) await limiter.penalty(projectId, delta);
  }

  private requestLimiterFor(requestsPerMinute: number, burstLimit: number): BurstyRateLimiter {
    const points = Math.max(1, Math.floor(requestsPerMinute * this.share));
    const burstPoints = Math.floor(burstLimit * this.share);
    const id = `${points}:${burstPoints}`;
    let limiter = this.requestLimiters.get(id);
    if (!limiter) {
      if (this.requestLimiters.size >= MAX_POLICIES) this.requestLimiters.clear();
      limiter = new BurstyRateLimiter(
        new RateLimiterMemory({ points, duration: this.windowSeconds, keyPrefix: `fallback:${id}` }),
        new RateLimiterMemory({ points: burstPoints, duration: this.burstWindowSeconds, keyPrefix: `fallback-burst:${id}` }),
      );
      this.requestLimiters.set(id, limiter);
    }
    return limiter;
  }

  private tokenLimiterFor(points: number): RateLimiterMemory {
    let limiter = this.tokenLimiters.get(points);
    if (!limiter) {
      if (this.tokenLimiters.size >= MAX_POLICIES) this.tokenLimiters.clear();
      limiter = new RateLimiterMemory({ points, duration: this.windowSeconds, keyPrefix: `fallback-tokens:${points}` });
      this.tokenLimiters.set(points, limiter);
    }
    return limiter;
  }
}

/** rate-limiter-flexible rejects with a RateLimiterRes when over the limit. */
async function settle(consumed: Promise<RateLimiterRes>): Promise<{ allowed: boolean; result: RateLimiterRes }> {
  try {
    return { allowed: true, result: await consumed };
  } catch (rejection) {
    if (rejection instanceof RateLimiterRes) return { allowed: false, result: rejection };
    throw rejection;
  }
}

/** A decision that admits nothing and holds nothing, to be filled in. */
export function refusedDecision(policy: RateLimitPolicy): AdmissionDecision {
  return {
    allowed: false,
    refusedBy: null,
    policy,
    remaining: 0,
    resetMs: 0,
    burstRemaining: 0,
    burstResetMs: 0,
    tokensRemaining: 0,
    tokensResetMs: 0,
    inFlight: 0,
    retryAfterMs: 0,
    reservation: null,
  };
}
