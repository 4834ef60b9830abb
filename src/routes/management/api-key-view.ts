import { NullablePolicyFields } from '../../config/schema.js';
import { NO_KEY_LIMITS, type KeyLimits } from '../../store/quota-types.js';
import { Type } from 'typebox';
import { redactSecret } from '../../auth/key-format.js';
import { Nullable, IsoTime } from '../../http/schemas.js';
import { mintId } from '../../core/ids.js';
import type { ApiKeyRecord } from '../../store/types.js';
import { PRIORITIES, type Priority } from '../../store/policy.js';
import { generateSecret, hashSecret } from '../../auth/key-format.js';
import { SCOPES, scopeMask, scopesOfMask, type Scope } from '../../auth/key-access.js';

/** Owner/team labels: bounded so a key's record stays small. */
export const KeyMetadata = Type.Record(Type.String(), Type.String({ maxLength: 256 }), {
  propertyNames: Type.String({ minLength: 1, maxLength: 64 }),
  maxProperties: 16,
  description: 'String labels (owner, team, …): at most 16 entries, keys 1-64 and values up to 256 characters',
});
export const KeyScopes = Type.Array(Type.Unsafe<Scope>({ type: 'string', enum: [...SCOPES] }), {
  maxItems: 16,
  description: `What the key may do: ${SCOPES.join(', ')}`,
});
export const KeyModels = Type.Array(Type.String({ minLength: 1, maxLength: 256 }), {
  maxItems: 64,
  description: 'Public model ids the key may use, `*` globs allowed; null: every model',
});

/** A key's or project's queue priority (DESIGN.md section 10); null: a key follows its project, a project is normal. */
export const PrioritySchema = Type.Unsafe<Priority>({ type: 'string', enum: [...PRIORITIES], description: `Queue priority: ${PRIORITIES.join(', ')}` });

const { requests_per_minute, burst_limit, tokens_per_minute, max_concurrent_requests, daily_tokens, monthly_tokens, monthly_cost } = NullablePolicyFields;

/** The key's own rate limits (within its project's, which still apply): each null or absent for none. */
export const KeyRateLimits = Type.Object(
  { requests_per_minute, burst_limit, tokens_per_minute, max_concurrent_requests },
  { additionalProperties: false, description: "The key's own limits; its project's still apply. null: none" },
);
/** The key's own budgets (UTC calendar periods). */
export const KeyBudgets = Type.Object(
  { daily_tokens, monthly_tokens, monthly_cost },
  { additionalProperties: false, description: "The key's own budgets (UTC day and month); its project's still apply. null: none" },
);

/** Fields a create and a PATCH take (PATCH: each optional). */
export const KeyPolicyFields = {
  models: Type.Optional(Nullable(KeyModels)),
  scopes: Type.Optional(KeyScopes),
  metadata: Type.Optional(KeyMetadata),
  rate_limits: Type.Optional(KeyRateLimits),
  budgets: Type.Optional(KeyBudgets),
  priority: Type.Optional(Nullable(PrioritySchema)),
};

const NullableNumber = Nullable(Type.Number());
const KeyRateLimitsView = Type.Object({
  requests_per_minute: NullableNumber,
  burst_limit: NullableNumber,
  tokens_per_minute: NullableNumber,
  max_concurrent_requests: NullableNumber,
});
const KeyBudgetsView = Type.Object({ daily_tokens: NullableNumber, monthly_tokens: NullableNumber, monthly_cost: NullableNumber });

/** GET /v1/api-keys/{id} adds what the key's budgets hold in the current UTC periods, and what is left. */
export const KeyBudgetUsage = Type.Object({
  day: Type.String(),
  month: Type.String(),
  used: KeyBudgetsView,
  remaining: KeyBudgetsView,
});

/** An API key as clients see it: metadata only, never the secret or its hash. */
export const ApiKeyFields = {
  name: Type.String(),
  project_id: Type.String(),
  redacted_value: Type.String(),
  created_at: IsoTime,
  expires_at: Nullable(IsoTime),
  last_used_at: Nullable(IsoTime),
  models: Nullable(Type.Array(Type.String())),
  scopes: Type.Array(Type.String()),
  metadata: Type.Record(Type.String(), Type.String()),
  rate_limits: KeyRateLimitsView,
  budgets: KeyBudgetsView,
  priority: Nullable(PrioritySchema),
};

export const ApiKeyItem = Type.Object({ id: Type.String(), ...ApiKeyFields });

export function apiKeyView(record: ApiKeyRecord) {
  return {
    id: record.id,
    name: record.name,
    project_id: record.project_id,
    redacted_value: record.redacted_value,
    created_at: record.created_at,
    expires_at: record.expires_at,
    last_used_at: record.last_used_at,
    models: record.models,
    // A key stored before scopes existed has them all (src/auth/key-access.ts).
    scopes: scopesOfMask(scopeMask(record.scopes)),
    metadata: record.metadata,
    ...keyLimitsView(record.limits ?? NO_KEY_LIMITS),
    priority: record.priority ?? null,
  };
}

export function keyLimitsView(limits: KeyLimits) {
  return {
    rate_limits: {
      requests_per_minute: limits.requests_per_minute,
      burst_limit: limits.burst_limit,
      tokens_per_minute: limits.tokens_per_minute,
      max_concurrent_requests: limits.max_concurrent_requests,
    },
    budgets: { daily_tokens: limits.daily_tokens, monthly_tokens: limits.monthly_tokens, monthly_cost: limits.monthly_cost },
  };
}

export interface KeyPolicy {
  models: string[] | null;
  scopes: string[];
  metadata: Record<string, string>;
  limits?: KeyLimits;
  /** null or absent: the key follows its project's. */
  priority?: Priority | null;
}

/** The project's first key (admin bootstrap): every scope and model. */
export const BOOTSTRAP_POLICY: KeyPolicy = { models: null, scopes: [...SCOPES], metadata: {} };

/** A fresh key: its record, the hash to store and the secret to show once. */
export function mintApiKey(projectId: string, name: string, expiresAt: string | null, now: number, policy: KeyPolicy = BOOTSTRAP_POLICY) {
  const secret = generateSecret();
  const record: ApiKeyRecord = {
    id: mintId('key', now),
    project_id: projectId,
    name,
    redacted_value: redactSecret(secret),
    created_at: new Date(now).toISOString(),
    expires_at: expiresAt,
    last_used_at: null,
    previous_secret_expires_at: null,
    models: policy.models,
    scopes: policy.scopes,
    metadata: policy.metadata,
    ...(policy.limits ? { limits: policy.limits } : {}),
    priority: policy.priority ?? null,
  };
  return { secret, key: { record, secretHash: hashSecret(secret) } };
}
