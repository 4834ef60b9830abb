import type { Priority, RateLimitPolicy } from './policy.js';

/** Rate-limit and usage parts of the Store (docs/limits-and-usage.md). */

export interface AdmissionSettings {
  /** The rolling window of requests_per_minute and tokens_per_minute (60 000 in production). */
  windowMs: number;
  /** The burst allowance refills by burst_limit per this many ms. */
  burstWindowMs: number;
  /** Sub-windows of the rolling window for the counter structure (60: one a second). */
  subWindows: number;
  /** requests_per_minute up to this keeps the exact sliding log; above, sub-window counters. */
  exactLogMax: number;
  /** A concurrency lease expires this long after its last renewal (a dead replica's slots). */
  leaseTtlMs: number;
  /** Used when the project record has no policy (it should always have one). */
  defaults: RateLimitPolicy;
  /**
   * The budget fractions the config's webhooks are told of (`alerts.webhooks[].thresholds`): a
   * settlement that takes a budget past one emits `budget.threshold_crossed` once (the project's own
   * webhooks add theirs in the store).
   */
  alertThresholds?: number[];
}

/** What one model request asks of the policy. */
export interface AdmissionRequest {
  /** Tokens reserved on the budgets: prompt estimate + the most output the request may produce. */
  tokens: number;
  /** Tokens reserved on the token rate: `tokens`, or less with a per-model output cap (reserve_output_tokens_max). */
  rateTokens: number;
  /** The reserved tokens' cost (0 without pricing). */
  cost: number;
  /** Unique per request: the window log member and the concurrency lease id. */
  id: string;
  /** UTC calendar periods of the budgets: `YYYY-MM-DD` and `YYYY-MM`. */
  day: string;
  month: string;
  /**
   * The API key's id when the key has limits of its own (rate_limits or budgets): the request must
   * pass both levels. Absent for a key without: the admission does no key-level work at all.
   */
  keyId?: string;
}

/** A key's own limits (DESIGN.md section 9): each null when the key has none (its project's still apply). */
export type KeyLimits = { [F in keyof RateLimitPolicy]: number | null };

export const NO_KEY_LIMITS: KeyLimits = {
  requests_per_minute: null,
  burst_limit: null,
  tokens_per_minute: null,
  max_concurrent_requests: null,
  daily_tokens: null,
  monthly_tokens: null,
  monthly_cost: null,
};

/** Which level refused: the key's own limits or its project's. */
export type LimitLevel = 'key' | 'project';

export type RefusedBy =
  | 'daily_tokens'
  | 'monthly_tokens'
  | 'monthly_cost'
  | 'requests'
  | 'tokens'
  | 'concurrency'
  /** The store is unreachable and budgets fail closed (rate_limits.budgets_when_store_down). */
  | 'budget_unchecked';

/** The limit kinds a model request is refused by, as usage buckets and metrics count them. */
export const MODEL_LIMIT_KINDS = ['requests', 'tokens', 'concurrency', 'budget'] as const;
export type ModelLimitKind = (typeof MODEL_LIMIT_KINDS)[number];
/** Which limit refused a request (the `limit` label of nova_rate_limit_refusals_total): a model limit, or the management limit. */
export type LimitKind = ModelLimitKind | 'management';

export function limitKindOf(refusedBy: RefusedBy): ModelLimitKind {
  if (refusedBy === 'requests' || refusedBy === 'tokens' || refusedBy === 'concurrency') return refusedBy;
  // Spent budgets, and budgets that fail closed while Redis is unreachable.
  return 'budget';
}

/** What an admitted request holds and must give back or correct when it ends. */
export interface Reservation {
  id: string;
  /** Sub-window (absolute index) holding the token-rate charge. */
  slot: number;
  /** Tokens charged to the token rate; null: no token rate was charged. */
  rateTokens: number | null;
  /** Tokens charged to the daily / monthly token budgets; null: that budget was not charged. */
  dayTokens: number | null;
  monthTokens: number | null;
  /** Cost charged to the monthly cost budget; null: not charged. */
  monthCost: number | null;
  day: string;
  month: string;
  /** A concurrency lease was taken. */
  lease: boolean;
  /** What the key level holds of the request (its key has limits); null or absent: nothing. */
  key?: KeyReservation | null;
  /** Taken by the per-replica fallback while the store was unreachable: settled there. */
  local?: true;
}

/** The key level's charges of an admitted request, settled with the project's in the same call. */
export interface KeyReservation {
  keyId: string;
  rateTokens: number | null;
  dayTokens: number | null;
  monthTokens: number | null;
  monthCost: number | null;
  day: string;
  month: string;
  lease: boolean;
}

/**
 * A level's figures after a decision. `remaining`/`resetMs` describe the rolling request window,
 * `burstRemaining`/`burstResetMs` the burst allowance, `tokens*` the token window and `inFlight`
 * the concurrency leases, all after the decision.
 */
export interface WindowFigures {
  /** Requests the window would still admit now (requests_per_minute minus those in the window). */
  remaining: number;
  /** Until the window is empty again (ms). */
  resetMs: number;
  /** Whole burst tokens left. */
  burstRemaining: number;
  /** Until the burst allowance is full again (ms). */
  burstResetMs: number;
  /** tokens_per_minute minus the tokens charged in the window (0 without a token rate). */
  tokensRemaining: number;
  /** Until the token window is empty again (ms). */
  tokensResetMs: number;
  /** Leases held after the decision (0 without a concurrency cap). */
  inFlight: number;
  /** Refused: the real time until a request would be admitted (ms); 0 when allowed. */
  retryAfterMs: number;
}

/** The key level's figures, for the key's own limits. */
export interface LevelFigures extends WindowFigures {
  policy: KeyLimits;
}

/** One admission decision: the project level's figures, and the key level's when the key has limits. */
export interface AdmissionDecision extends WindowFigures {
  allowed: boolean;
  /** The limit that refused (a spent budget first, then requests, tokens, concurrency); null when admitted. */
  refusedBy: RefusedBy | null;
  /** The level that refused (null when admitted). */
  level?: LimitLevel | null;
  policy: RateLimitPolicy;
  /** The key level's figures, when the key has limits of its own. */
  key?: LevelFigures | null;
  /** Admitted: what to settle when the request ends (null: nothing to settle). */
  reservation: Reservation | null;
  /** The project's queue priority, read with its policy (null or absent: none). */
  priority?: Priority | null;
}

/** Whether an admitted request holds anything to give back or correct when it ends. */
export function needsSettling(reservation: Reservation): boolean {
  return (
    reservation.lease ||
    reservation.rateTokens !== null ||
    reservation.dayTokens !== null ||
    reservation.monthTokens !== null ||
    reservation.monthCost !== null ||
    (reservation.key !== undefined && reservation.key !== null)
  );
}

/** What an admitted request really used. */
export interface Settlement {
  tokens: number;
  cost: number;
}

export interface KeyBudgetUsed {
  dayTokens: number;
  monthTokens: number;
  monthCost: number;
}

/** A settlement as the quota store numbers it: per replica, in the order it sends them. */
export interface SettleFence {
  replica: string;
  seq: number;
}

export interface QuotaStore {
  /** Decides every limit of one model request and, when admitted, charges it: one round trip, atomic. */
  admit(projectId: string, settings: AdmissionSettings, request: AdmissionRequest): Promise<AdmissionDecision>;
  /**
   * Replaces the reservation by the real usage and releases the lease: one round trip. A failure may
   * be a SettlementFailedError, whose fence a budget correction names (usage-types.ts BudgetCorrection).
   */
  settle(projectId: string, settings: AdmissionSettings, reservation: Reservation, used: Settlement): Promise<void>;
  /** What a key's own budgets hold for the given UTC day and month (0 for a period they do not hold). */
  keyBudgetUsage(projectId: string, keyId: string, day: string, month: string): Promise<KeyBudgetUsed>;
  /** Extends the given leases of a project (a live replica's requests) by the lease TTL; with keyId, that key's. */
  renew(projectId: string, settings: AdmissionSettings, leaseIds: string[], keyId?: string): Promise<void>;
}
