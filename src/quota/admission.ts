import type { GatewayConfig } from '../config/gateway-config.js';
import type { QuotaMetrics } from '../metrics/quota-metrics.js';
import type { AdmissionDecision, AdmissionSettings } from '../store/quota-types.js';
import { StoreUnavailableError, type RateLimitPolicy, type Store } from '../store/types.js';
import { FallbackLimiter } from './fallback-limiter.js';

/** After a store failure, admission skips the store this long before probing it again. */
const STORE_RETRY_MS = 1000;
const MAX_CACHED_POLICIES = 100_000;

export interface Admitted extends AdmissionDecision {
  source: 'store' | 'fallback';
}

export interface AdmissionOptions {
  store: Store;
  config: GatewayConfig;
  metrics: QuotaMetrics;
  now?: () => number;
  onStoreError?: (error: unknown) => void;
}

/**
 * Per-project admission: the store's shared sliding window + burst (one round trip), or,
 * while the store is unreachable, a per-replica fallback sized by the last policy seen.
 * Failing over is quick: after one failure the store is skipped for a second, and then
 * one request at a time probes it, so a hung Redis costs at most one timeout per second.
 */
export class Admission {
  readonly settings: AdmissionSettings;
  private readonly fallback: FallbackLimiter;
  private readonly policies = new Map<string, RateLimitPolicy>();
  private readonly now: () => number;
  private skipStoreUntil = 0;
  private probing = false;

  constructor(private readonly options: AdmissionOptions) {
    const { rate_limits: limits, defaults } = options.config;
    this.settings = {
      windowMs: limits.window_seconds * 1000,
      burstWindowMs: limits.burst_window_seconds * 1000,
      defaults: defaults.rate_limits,
    };
    this.fallback = new FallbackLimiter(limits.fallback_share, limits.window_seconds, limits.burst_window_seconds);
    this.now = options.now ?? Date.now;
  }

  async admit(projectId: string): Promise<Admitted> {
    const { metrics } = this.options;
    if (this.storeUsable()) {
      const probe = this.skipStoreUntil !== 0;
      if (probe) this.probing = true;
      try {
        const decision = await this.options.store.quota.admit(projectId, this.settings);
        this.remember(projectId, decision.policy);
        if (probe) metrics.fallbackActive.set(0);
        this.skipStoreUntil = 0;
        metrics.decided(projectId, decision.allowed, 'store');
        return { ...decision, source: 'store' };
      } catch (error) {
        if (!(error instanceof StoreUnavailableError)) throw error;
        this.skipStoreUntil = this.now() + STORE_RETRY_MS;
        metrics.storeErrors.inc({ operation: 'admission' });
        metrics.fallbackActive.set(1);
        this.options.onStoreError?.(error);
      } finally {
        if (probe) this.probing = false;
      }
    }
    const policy = this.policies.get(projectId) ?? this.settings.defaults;
    const decision = await this.fallback.admit(projectId, policy);
    metrics.decided(projectId, decision.allowed, 'fallback');
    return { ...decision, source: 'fallback' };
  }

  private storeUsable(): boolean {
    if (this.skipStoreUntil === 0) return true;
    return this.now() >= this.skipStoreUntil && !this.probing;
  }

  private remember(projectId: string, policy: RateLimitPolicy): void {
    if (this.policies.size >= MAX_CACHED_POLICIES && !this.policies.has(projectId)) {
      this.policies.delete(this.policies.keys().next().value!);
    }
    this.policies.set(projectId, policy);
  }
}
