import { fullPolicy } from '../policy.js';
import type { AdmissionDecision, AdmissionSettings, QuotaStore } from '../quota-types.js';
import type { RateLimitPolicy } from '../types.js';

interface ProjectWindow {
  /** Admission times of the requests counted against requests_per_minute, oldest first. */
  log: number[];
  /** Burst tokens as of `at`; undefined = never drawn (full). */
  tokens: number | undefined;
  at: number;
}

const SWEEP_EVERY = 10_000;

/**
 * The same algorithm as the Redis script (src/store/redis/rate-limit.ts), for one process:
 * a sliding log of admissions for the rolling window plus a continuously refilling burst
 * allowance. Refusals change nothing.
 */
export class MemoryQuotaStore implements QuotaStore {
  private readonly windows = new Map<string, ProjectWindow>();
  private decisions = 0;

  constructor(
    private readonly policyOf: (projectId: string) => RateLimitPolicy | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  async admit(projectId: string, settings: AdmissionSettings): Promise<AdmissionDecision> {
    const now = this.now();
    const { windowMs, burstWindowMs } = settings;
    const policy = this.policyOf(projectId) ?? settings.defaults;
    const { requests_per_minute: rpm, burst_limit: burst } = policy;
    if (++this.decisions % SWEEP_EVERY === 0) this.sweep(now, windowMs, burstWindowMs);

    let state = this.windows.get(projectId);
    if (!state) this.windows.set(projectId, (state = { log: [], tokens: undefined, at: now }));
    let expired = 0;
    while (expired < state.log.length && state.log[expired]! <= now - windowMs) expired++;
    if (expired) state.log.splice(0, expired);

    let tokens = state.tokens === undefined ? burst : Math.min(burst, state.tokens + ((now - state.at) * burst) / burstWindowMs);
    let allowed = false;
    if (state.log.length < rpm) {
      allowed = true;
      state.log.push(now);
    } else if (tokens >= 1) {
      allowed = true;
      tokens -= 1;
      state.tokens = tokens;
      state.at = now;
    }
    const used = state.log.length;
    let retryAfterMs = 0;
    if (!allowed) {
      retryAfterMs = state.log[used - rpm]! + windowMs - now;
      if (burst > 0) retryAfterMs = Math.min(retryAfterMs, Math.ceil(((1 - tokens) * burstWindowMs) / burst));
    }
    return {
      allowed,
      policy: fullPolicy({ requests_per_minute: rpm, burst_limit: burst }),
      remaining: Math.max(0, rpm - used),
      resetMs: used > 0 ? state.log[used - 1]! + windowMs - now : 0,
      burstRemaining: Math.floor(tokens + 1e-9),
      burstResetMs: burst > 0 && tokens < burst ? Math.ceil(((burst - tokens) * burstWindowMs) / burst) : 0,
      retryAfterMs,
    };
  }

  /** Forgets projects whose window is empty and whose burst allowance is full again. */
  private sweep(now: number, windowMs: number, burstWindowMs: number): void {
    for (const [projectId, state] of this.windows) {
      const idle = state.log.length === 0 || state.log.at(-1)! <= now - windowMs;
      if (idle && now - state.at >= burstWindowMs) this.windows.delete(projectId);
    }
  }
}
