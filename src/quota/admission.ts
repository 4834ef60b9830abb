import type { GatewayConfig } from '../config/gateway-config.js';
import { randomBase62 } from '../core/ids.js';
import type { QuotaMetrics } from '../metrics/quota-metrics.js';
import { RecentMap } from '../core/recent-map.js';
import type { AdmissionDecision, AdmissionSettings, KeyLimits, Reservation, SettleFence, Settlement } from '../store/quota-types.js';
import { SettlementFailedError } from '../store/store-errors.js';
import { POLICY_FIELDS } from '../store/policy.js';
import { DEFAULT_ALERT_THRESHOLDS } from '../store/alert-types.js';
import { StoreUnavailableError, type RateLimitPolicy, type Store } from '../store/types.js';
import { budgetPeriodsAt } from './budget-periods.js';
import { FallbackLimiter, refusedDecision } from './fallback-limiter.js';
import type { Charge } from './request-charge.js';
import type { Settler } from './quota-reservation.js';
import type { UsageMeter } from './usage-meter.js';

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
  /** Carries budget corrections the store could not take at settlement (see settle). */
  usage?: UsageMeter;
}

/**
 * Per-project admission of model requests: the store decides every limit at once (one round
 * trip) and settles each admitted request once (one more, only when it holds something); while
 * the store is unreachable, a per-replica fallback sized by the last policy seen. Failing over is
 * quick: after one failure the store is skipped for a second, and then one request at a time
 * probes it, so a hung Redis costs at most one timeout per second. The concurrency leases of this
 * replica's requests in flight are renewed every third of their TTL, so the slots of a replica
 * that died free within the TTL.
 */
export class Admission implements Settler {
  readonly settings: AdmissionSettings;
  private readonly fallback: FallbackLimiter;
  /** The last policy seen of each project, for the fallback; the projects admitted least recently go first. */
  private readonly policies = new RecentMap<string, RateLimitPolicy>(MAX_CACHED_POLICIES);
  /** The last limits seen of each key level (keys with limits of their own), for the fallback. */
  private readonly keyPolicies = new RecentMap<string, KeyLimits>(MAX_CACHED_POLICIES);
  private readonly now: () => number;
  /** Leases of this replica's requests in flight, by project. */
  private readonly leases = new Map<string, Set<string>>();
  private readonly renewal: NodeJS.Timeout;
  /** Request ids are the client's to choose; log members and lease ids must be unique. */
  private readonly replica = randomBase62(8);
  private sequence = 0;
  private skipStoreUntil = 0;
  private probing = false;

  constructor(private readonly options: AdmissionOptions) {
    const { rate_limits: limits, defaults } = options.config;
    this.settings = {
      windowMs: limits.window_seconds * 1000,
      burstWindowMs: limits.burst_window_seconds * 1000,
      subWindows: limits.sub_windows,
      exactLogMax: limits.exact_log_max,
      leaseTtlMs: limits.lease_ttl_seconds * 1000,
      defaults: defaults.rate_limits,
      alertThresholds: [...new Set(options.config.alerts.webhooks.flatMap((webhook) => webhook.thresholds ?? DEFAULT_ALERT_THRESHOLDS))],
    };
    this.fallback = new FallbackLimiter(limits.fallback_share, limits.window_seconds, limits.burst_window_seconds);
    this.now = options.now ?? Date.now;
    this.renewal = setInterval(() => void this.renewLeases(), this.settings.leaseTtlMs / 3).unref();
  }

  /** `keyId`: the request's key when it has limits of its own (both levels must admit it). */
  async admit(projectId: string, charge: Charge, keyId?: string): Promise<Admitted> {
    const { metrics } = this.options;
    if (this.storeUsable()) {
      const probe = this.skipStoreUntil !== 0;
      if (probe) this.probing = true;
      try {
        const { day, month } = budgetPeriodsAt(this.now());
        const decision = await this.options.store.quota.admit(projectId, this.settings, {
          id: this.nextId(),
          tokens: charge.tokens,
          rateTokens: charge.rateTokens,
          cost: charge.cost,
          day,
          month,
          ...(keyId === undefined ? {} : { keyId }),
        });
        // The project's policy object is kept while its values do not change: what is derived
        // from it (the rate-limit header text) is made once per policy, not once per request.
        const known = this.policies.get(projectId);
        if (known !== undefined && samePolicy(known, decision.policy)) decision.policy = known;
        this.policies.set(projectId, decision.policy);
        if (probe) metrics.fallbackActive.set(0);
        this.skipStoreUntil = 0;
        metrics.decided(projectId, decision.allowed, 'store', decision.refusedBy);
        if (decision.key) this.keyPolicies.set(keyLevelId(projectId, keyId!), decision.key.policy);
        if (decision.reservation?.lease) this.holdLease(projectId, decision.reservation.id);
        if (decision.reservation?.key?.lease) this.holdLease(keyLevelId(projectId, keyId!), decision.reservation.id);
        return { ...decision, source: 'store' };
      } catch (error) {
        if (!(error instanceof StoreUnavailableError)) throw error;
        this.storeFailed(error, 'admission');
      } finally {
        if (probe) this.probing = false;
      }
    }
    return this.admitByFallback(projectId, charge, keyId);
  }

  /** Replaces the reservation by the real usage and releases the lease (off the request path). */
  settle(projectId: string, reservation: Reservation, used: Settlement, reserved: number): void {
    const { metrics } = this.options;
    if (reservation.rateTokens !== null || reservation.dayTokens !== null || reservation.monthTokens !== null) {
      metrics.tokensReserved.inc(metrics.labels(projectId), reserved);
      metrics.tokensSettled.inc(metrics.labels(projectId), used.tokens);
    }
    if (reservation.local) {
      void this.fallback.settle(projectId, this.policies.get(projectId), reservation, used);
      const key = reservation.key;
      if (key) {
        const id = keyLevelId(projectId, key.keyId);
        void this.fallback.settle(id, this.keyPolicies.get(id), { ...reservation, ...key, id: reservation.id }, used);
      }
      // Its budgets were charged nothing in the store (budgets_when_store_down: open): they get the usage.
      this.correctBudgets(projectId, reservation, used, null);
      return;
    }
    if (reservation.lease) this.dropLease(projectId, reservation.id);
    if (reservation.key?.lease) this.dropLease(keyLevelId(projectId, reservation.key.keyId), reservation.id);
    this.options.store.quota.settle(projectId, this.settings, reservation, used).catch((error: unknown) => {
      // A lease left behind expires with its TTL. The budget charge goes with the usage records
      // instead, fenced against the settlement itself running late (src/store/redis/apply-usage.lua).
      if (error instanceof StoreUnavailableError) {
        metrics.storeErrors.inc({ operation: 'settlement' });
        this.correctBudgets(projectId, reservation, used, error instanceof SettlementFailedError ? error.fence : null);
      } else this.options.onStoreError?.(error);
    });
  }

  /**
   * Sends what the budget counters miss of a request (its use minus what they hold of it) with the
   * usage records, which the store applies exactly once: the counters catch up when it is back.
   */
  private correctBudgets(projectId: string, reservation: Reservation, used: Settlement, fence: SettleFence | null): void {
    // The project's and the key's go under the same fence: both count, or the settlement does.
    for (const [charged, keyId] of [[reservation, undefined], [reservation.key, reservation.key?.keyId]] as const) {
      if (!charged) continue;
      const { dayTokens, monthTokens, monthCost, day, month } = charged;
      if (dayTokens === null && monthTokens === null && monthCost === null) continue;
      const budget = {
        ...(keyId === undefined ? {} : { keyId }),
        day,
        month,
        dayTokens: dayTokens === null ? 0 : used.tokens - dayTokens,
        monthTokens: monthTokens === null ? 0 : used.tokens - monthTokens,
        monthCost: monthCost === null ? 0 : used.cost - monthCost,
        settledDayTokens: dayTokens === null ? 0 : used.tokens,
        settledMonthTokens: monthTokens === null ? 0 : used.tokens,
        settledMonthCost: monthCost === null ? 0 : used.cost,
        ...(fence ? { fence } : {}),
      };
      this.options.usage?.record({ projectId, requestId: reservation.id, part: keyId === undefined ? 'budget' : 'key-budget', budget });
    }
  }

  /**
   * While the store is unreachable: the per-replica fallback for requests, tokens and concurrency,
   * sized by the last policy seen; budgets cannot be checked and fail open or closed by config.
   */
  private async admitByFallback(projectId: string, charge: Charge, keyId?: string): Promise<Admitted> {
    const { metrics, config } = this.options;
    const policy = this.policies.get(projectId) ?? this.settings.defaults;
    // The key's last limits seen: a key first seen while the store is down has only its project's.
    const keyLevel = keyId === undefined ? undefined : keyLevelId(projectId, keyId);
    const keyPolicy = keyLevel === undefined ? undefined : this.keyPolicies.get(keyLevel);
    const budgeted = isBudgeted(policy) || (keyPolicy !== undefined && isBudgeted(keyPolicy));
    const closed = budgeted && config.rate_limits.budgets_when_store_down === 'closed';
    if (budgeted) metrics.budgetsStoreDown.inc({ decision: closed ? 'closed' : 'open' });
    const { day, month } = budgetPeriodsAt(this.now());
    const id = this.nextId();
    let decision: AdmissionDecision = closed
      ? { ...refusedDecision(policy), refusedBy: 'budget_unchecked' as const, level: isBudgeted(policy) ? 'project' : 'key', retryAfterMs: STORE_RETRY_MS }
      : await this.fallback.admit(projectId, policy, { id, tokens: charge.rateTokens, day, month });
    if (!decision.allowed && !decision.level) decision.level = 'project';
    if (decision.allowed && keyLevel !== undefined && keyPolicy !== undefined) {
      const byKey = await this.fallback.admit(keyLevel, keyPolicy, { id, tokens: charge.rateTokens, day, month });
      const figures = { ...byKey, policy: keyPolicy };
      if (!byKey.allowed) {
        // Refused at the key level: the project's tokens and slot go back (its request count stays, approximate by design).
        if (decision.reservation) await this.fallback.settle(projectId, policy, decision.reservation, { tokens: 0, cost: 0 });
        decision = { ...decision, allowed: false, refusedBy: byKey.refusedBy, level: 'key', retryAfterMs: byKey.retryAfterMs, reservation: null, key: figures };
      } else {
        const held = byKey.reservation;
        const key = held === null ? null : { keyId: keyId!, rateTokens: held.rateTokens, dayTokens: held.dayTokens, monthTokens: held.monthTokens, monthCost: held.monthCost, day, month, lease: held.lease };
        const reservation = decision.reservation ?? (key ? { ...held!, rateTokens: null, dayTokens: null, monthTokens: null, monthCost: null, lease: false } : null);
        decision = { ...decision, key: figures, reservation: reservation && { ...reservation, key } };
      }
    }
    metrics.decided(projectId, decision.allowed, 'fallback', decision.refusedBy);
    return { ...decision, source: 'fallback' };
  }

  close(): void {
    clearInterval(this.renewal);
  }

  private async renewLeases(): Promise<void> {
    for (const [level, ids] of this.leases) {
      const [projectId, keyId] = level.split(KEY_LEVEL_SEPARATOR) as [string, string | undefined];
      await this.options.store.quota.renew(projectId, this.settings, [...ids], keyId).catch((error: unknown) => {
        if (error instanceof StoreUnavailableError) this.options.metrics.storeErrors.inc({ operation: 'lease_renewal' });
      });
    }
  }

  private holdLease(projectId: string, id: string): void {
    let ids = this.leases.get(projectId);
    if (!ids) this.leases.set(projectId, (ids = new Set()));
    ids.add(id);
  }

  private dropLease(projectId: string, id: string): void {
    const ids = this.leases.get(projectId);
    if (!ids) return;
    ids.delete(id);
    if (ids.size === 0) this.leases.delete(projectId);
  }

  private nextId(): string {
    this.sequence = (this.sequence + 1) % Number.MAX_SAFE_INTEGER;
    return `${this.replica}${this.sequence.toString(36)}`;
  }

  private storeFailed(error: unknown, operation: string): void {
    this.skipStoreUntil = this.now() + STORE_RETRY_MS;
    this.options.metrics.storeErrors.inc({ operation });
    this.options.metrics.fallbackActive.set(1);
    this.options.onStoreError?.(error);
  }

  private storeUsable(): boolean {
    if (this.skipStoreUntil === 0) return true;
    return this.now() >= this.skipStoreUntil && !this.probing;
  }

}

/** A key level's id beside its project's, in this process's maps (no project id holds a NUL). */
const KEY_LEVEL_SEPARATOR = '\u0000';
const keyLevelId = (projectId: string, keyId: string) => `${projectId}${KEY_LEVEL_SEPARATOR}${keyId}`;

const isBudgeted = (limits: KeyLimits) => limits.daily_tokens !== null || limits.monthly_tokens !== null || limits.monthly_cost !== null;

function samePolicy(a: RateLimitPolicy, b: RateLimitPolicy): boolean {
  for (const field of POLICY_FIELDS) if (a[field] !== b[field]) return false;
  return true;
}
