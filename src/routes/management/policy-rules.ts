import type { GatewayConfig } from '../../config/gateway-config.js';
import { invalidParameter } from '../../http/errors.js';
import { aboveCeiling, ceilingOf, POLICY_FIELDS, type Ceilings, type PolicyField, type RateLimitPolicy } from '../../store/policy.js';

/** The project's effective ceilings: its own where the admin set one, else the config's. */
export function effectiveCeilings(own: Ceilings, config: GatewayConfig): Record<PolicyField, number | null> {
  const out = {} as Record<PolicyField, number | null>;
  for (const field of POLICY_FIELDS) out[field] = ceilingOf(field, own, config.ceilings);
  return out;
}

/** A project key's change stays within the project's ceilings: else 400 naming the field and the ceiling. */
export function checkCeilings(patch: Partial<RateLimitPolicy>, own: Ceilings, config: GatewayConfig): void {
  for (const field of POLICY_FIELDS) {
    const value = patch[field];
    if (value === undefined) continue;
    const ceiling = ceilingOf(field, own, config.ceilings);
    if (!aboveCeiling(value, ceiling)) continue;
    const asked = value === null ? 'null (no limit)' : String(value);
    throw invalidParameter(
      `${field} ${asked} is above this project's ceiling of ${ceiling}; set at most ${ceiling}, or ask the operator to raise the ceiling.`,
      field,
    );
  }
}

/**
 * A cost budget needs prices: without any priced model (`models[].pricing`) no request has a cost,
 * so a monthly_cost would silently never bind. Refused (400) for keys and the admin alike.
 */
export function checkCostBudget(patch: Partial<RateLimitPolicy>, config: GatewayConfig): void {
  if (patch.monthly_cost === undefined || patch.monthly_cost === null) return;
  if (config.models.some((model) => model.pricing !== undefined)) return;
  throw invalidParameter('monthly_cost needs at least one model with pricing in the gateway config; no model has a price.', 'monthly_cost');
}
