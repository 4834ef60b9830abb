/**
 * A project's quota policy (docs/limits-and-usage.md) and its ceilings. Every optional limit is
 * `null` when the project has none.
 */
export interface RateLimitPolicy {
  requests_per_minute: number;
  burst_limit: number;
  tokens_per_minute: number | null;
  max_concurrent_requests: number | null;
  daily_tokens: number | null;
  monthly_tokens: number | null;
  /** Currency units (of `models[].pricing`) per UTC calendar month. */
  monthly_cost: number | null;
}

export type PolicyField = keyof RateLimitPolicy;

export const POLICY_FIELDS: readonly PolicyField[] = [
  'requests_per_minute',
  'burst_limit',
  'tokens_per_minute',
  'max_concurrent_requests',
  'daily_tokens',
  'monthly_tokens',
  'monthly_cost',
];

/** The optional limits: null (none) is a valid value. */
export const OPTIONAL_FIELDS: readonly PolicyField[] = POLICY_FIELDS.slice(2);

/**
 * The most a project key may set for each field (entitlements); null = no ceiling. A project
 * holds only the ceilings the admin set for it; the rest come from the config.
 */
export type Ceilings = Partial<Record<PolicyField, number | null>>;

export interface PolicyPatch {
  rate_limits?: Partial<RateLimitPolicy>;
  ceilings?: Ceilings;
  /** The project's queue priority (null: none set, normal). */
  priority?: Priority | null;
}

/**
 * A key's or project's priority in a model's queue (DESIGN.md section 10): high first, low never
 * starved. A key without its own follows its project's; a project without one is normal.
 */
export const PRIORITIES = ['high', 'normal', 'low'] as const;
export type Priority = (typeof PRIORITIES)[number];

export const NO_OPTIONAL_LIMITS = {
  tokens_per_minute: null,
  max_concurrent_requests: null,
  daily_tokens: null,
  monthly_tokens: null,
  monthly_cost: null,
} as const satisfies Partial<RateLimitPolicy>;

/** A policy with every field: optional limits missing from `partial` are none. */
export function fullPolicy(partial: Pick<RateLimitPolicy, 'requests_per_minute' | 'burst_limit'> & Partial<RateLimitPolicy>): RateLimitPolicy {
  return { ...NO_OPTIONAL_LIMITS, ...partial };
}

/** The ceiling of a field for a project: its own, else the config's default, else none. */
export function ceilingOf(field: PolicyField, own: Ceilings, defaults: Ceilings): number | null {
  if (own[field] !== undefined) return own[field];
  return defaults[field] ?? null;
}

/** Whether `value` (null = no limit) is above `ceiling` (null = no ceiling). */
export function aboveCeiling(value: number | null, ceiling: number | null): boolean {
  if (ceiling === null) return false;
  return value === null || value > ceiling;
}
