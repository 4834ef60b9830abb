import { BurstyRateLimiter, RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { AdmissionDecision } from '../store/quota-types.js';
import type { RateLimitPolicy } from '../store/types.js';

const MAX_POLICIES = 1000;

/**
 * Admission while Redis is unreachable: each replica limits on its own to `share` of the
 * project's policy, with rate-limiter-flexible's in-memory limiters (a fixed window for
 * requests_per_minute composed with a burst limiter, BurstyRateLimiter). Approximate by
 * design: it only has to keep a project near its policy until Redis is back.
 */
export class FallbackLimiter {
  private readonly limiters = new Map<string, BurstyRateLimiter>();

  constructor(
    private readonly share: number,
    private readonly windowSeconds: number,
    private readonly burstWindowSeconds: number,
  ) {}

  async admit(projectId: string, policy: RateLimitPolicy): Promise<AdmissionDecision> {
    const points = Math.max(1, Math.floor(policy.requests_per_minute * this.share));
    const burstPoints = Math.floor(policy.burst_limit * this.share);
    const limiter = this.limiterFor(points, burstPoints);
    const decision = (res: RateLimiterRes, allowed: boolean): AdmissionDecision => ({
      allowed,
      refusedBy: allowed ? null : 'requests',
      policy,
      remaining: Math.max(0, res.remainingPoints),
      resetMs: res.msBeforeNext,
      burstRemaining: 0,
      burstResetMs: 0,
      tokensRemaining: 0,
      tokensResetMs: 0,
      inFlight: 0,
      retryAfterMs: allowed ? 0 : Math.max(1, res.msBeforeNext),
      reservation: null,
    });
    try {
      return decision(await limiter.consume(projectId), true);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) return decision(rejection, false);
      throw rejection;
    }
  }

  private limiterFor(points: number, burstPoints: number): BurstyRateLimiter {
    const id = `${points}:${burstPoints}`;
    let limiter = this.limiters.get(id);
    if (!limiter) {
      if (this.limiters.size >= MAX_POLICIES) this.limiters.clear();
      limiter = new BurstyRateLimiter(
        new RateLimiterMemory({ points, duration: this.windowSeconds, keyPrefix: `fallback:${id}` }),
        new RateLimiterMemory({ points: burstPoints, duration: this.burstWindowSeconds, keyPrefix: `fallback-burst:${id}` }),
      );
      this.limiters.set(id, limiter);
    }
    return limiter;
  }
}
