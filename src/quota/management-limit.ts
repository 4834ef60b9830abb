import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

export interface ManagementDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  resetMs: number;
}

/**
 * The per-project limit of management routes (keys, projects, usage, conversations, records,
 * models): a fixed window of `limit` requests shared by the replicas (rate-limiter-flexible on the
 * store; per replica while Redis is unreachable). It guards the store against a runaway client and
 * is deliberately apart from the model policy: model traffic never consumes it and it never
 * consumes the model policy. A fixed window may admit up to 2 x limit across a window edge; that is
 * acceptable for a guard (the model policy is the one that must be exact).
 */
export class ManagementLimit {
  constructor(
    private readonly limiter: RateLimiterAbstract,
    readonly limit: number,
  ) {}

  async admit(projectId: string): Promise<ManagementDecision> {
    const decision = (res: RateLimiterRes, allowed: boolean): ManagementDecision => ({
      allowed,
      limit: this.limit,
      remaining: Math.max(0, res.remainingPoints),
      resetMs: Math.max(0, res.msBeforeNext),
    });
    try {
      return decision(await this.limiter.consume(projectId), true);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) return decision(rejection, false);
      throw rejection;
    }
  }
}
