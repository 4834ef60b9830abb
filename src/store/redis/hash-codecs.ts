import { OPTIONAL_FIELDS, POLICY_FIELDS, PRIORITIES, type Ceilings, type PolicyPatch, type Priority, type RateLimitPolicy } from '../policy.js';
import type { KeyLimits } from '../quota-types.js';
import type { ApiKeyPatch, ApiKeyRecord, AuditEvent, KeyPrincipal, ProjectRecord } from '../types.js';

// Codecs between the Store's records and what Redis holds of them: hash fields, stream entries, JSON.

/** HGETALL as a flat [field, value, …] list (what Lua scripts return) to an object. */
export function pairsToObject(pairs: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < pairs.length; i += 2) out[pairs[i]!] = pairs[i + 1]!;
  return out;
}

/** Redis hashes hold strings: '' stands for null. */
const orNull = (value: string | undefined) => (value === undefined || value === '' ? null : value);

/** A key's or project's `priority` field; '' or absent (stored before it existed), or a value the queue does not know: none. */
export const priorityOrNull = (value: string | null | undefined): Priority | null =>
  (PRIORITIES as readonly string[]).includes(value ?? '') ? (value as Priority) : null;

export function apiKeyToHash(record: ApiKeyRecord, secretHash: string): Record<string, string> {
  return {
    id: record.id,
    project_id: record.project_id,
    name: record.name,
    redacted_value: record.redacted_value,
    created_at: record.created_at,
    expires_at: record.expires_at ?? '',
    last_used_at: record.last_used_at ?? '',
    previous_secret_expires_at: record.previous_secret_expires_at ?? '',
    ...apiKeyPatchToHash(record),
    hash: secretHash,
    prev_hash: '',
  };
}

export function apiKeyFromHash(hash: Record<string, string>): ApiKeyRecord | null {
  if (!hash.id) return null;
  return {
    id: hash.id,
    project_id: hash.project_id!,
    name: hash.name!,
    redacted_value: hash.redacted_value!,
    created_at: hash.created_at!,
    expires_at: orNull(hash.expires_at),
    last_used_at: orNull(hash.last_used_at),
    previous_secret_expires_at: orNull(hash.previous_secret_expires_at),
    models: jsonOrNull<string[]>(hash.models),
    scopes: jsonOrNull<string[]>(hash.scopes),
    metadata: jsonOrNull<Record<string, string>>(hash.metadata) ?? {},
    limits: keyLimitsFromFields(POLICY_FIELDS.map((field) => hash[field])),
    priority: priorityOrNull(hash.priority),
  };
}

/** A key's limits from its record's policy fields (quota-batch.lua reads the same ones); '' or absent: none. */
export function keyLimitsFromFields(values: readonly (string | null | undefined)[]): KeyLimits {
  const limits = {} as KeyLimits;
  POLICY_FIELDS.forEach((field, i) => {
    const value = values[i];
    limits[field] = value === undefined || value === null || value === '' ? null : Number(value);
  });
  return limits;
}

/** The key's list and map fields are JSON in their hash fields; '' or absent (a key stored before they existed) is null. */
const jsonOrNull = <T>(value: string | undefined): T | null => (value === undefined || value === '' ? null : (JSON.parse(value) as T));

/** Hash fields of the given key fields (PATCH, or a whole record). */
export function apiKeyPatchToHash(patch: ApiKeyPatch): Record<string, string> {
  const fields: Record<string, string> = {};
  if (patch.name !== undefined) fields.name = patch.name;
  if (patch.expires_at !== undefined) fields.expires_at = patch.expires_at ?? '';
  if (patch.models !== undefined) fields.models = patch.models === null ? '' : JSON.stringify(patch.models);
  if (patch.scopes !== undefined) fields.scopes = patch.scopes === null ? '' : JSON.stringify(patch.scopes);
  if (patch.metadata !== undefined) fields.metadata = JSON.stringify(patch.metadata);
  if (patch.priority !== undefined) fields.priority = patch.priority ?? '';
  for (const [field, value] of Object.entries(patch.limits ?? {})) if (value !== undefined) fields[field] = numberOrEmpty(value);
  return fields;
}

/** The key record's fields principalWithRecord reads, in its order (resolve HMGETs them). */
export const PRINCIPAL_RECORD_FIELDS = ['id', 'expires_at', 'scopes', 'models', 'priority', ...POLICY_FIELDS] as const;

/** A principal's current scopes, models, priority and expiry from HMGET of PRINCIPAL_RECORD_FIELDS. */
export function principalWithRecord(principal: KeyPrincipal, [id, expiresAt, scopes, models, priority, ...limits]: (string | null)[]): KeyPrincipal | null {
  if (!id) return null;
  return {
    limited: limits.some((value) => value !== null && value !== ''),
    ...principal,
    expiresAtMs: expiresAt ? Date.parse(expiresAt) : null,
    scopes: jsonOrNull<string[]>(scopes ?? undefined),
    models: jsonOrNull<string[]>(models ?? undefined),
    priority: priorityOrNull(priority),
  };
}

const CEILING = 'ceiling:';
const numberOrEmpty = (value: number | null) => (value === null ? '' : String(value));

/** Hash fields of a policy patch: limits under their own names, ceilings under `ceiling:<field>` ('' = none). */
export function policyPatchToHash(patch: PolicyPatch): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [field, value] of Object.entries(patch.rate_limits ?? {})) fields[field] = numberOrEmpty(value);
  for (const [field, value] of Object.entries(patch.ceilings ?? {})) fields[CEILING + field] = numberOrEmpty(value);
  if (patch.priority !== undefined) fields.priority = patch.priority ?? '';
  return fields;
}

export function projectToHash(project: ProjectRecord): Record<string, string> {
  return {
    id: project.id,
    name: project.name,
    environment: project.environment ?? '',
    created_at: project.created_at,
    updated_at: project.updated_at,
    ...policyPatchToHash({ rate_limits: project.rate_limits, ceilings: project.ceilings, priority: project.priority }),
  };
}

/** A project stored before a limit existed has none of it (a missing field is null). */
function policyFromHash(hash: Record<string, string>): RateLimitPolicy {
  const policy = { requests_per_minute: Number(hash.requests_per_minute), burst_limit: Number(hash.burst_limit) } as RateLimitPolicy;
  for (const field of OPTIONAL_FIELDS) {
    const value = hash[field];
    (policy as unknown as Record<string, number | null>)[field] = value === undefined || value === '' ? null : Number(value);
  }
  return policy;
}

function ceilingsFromHash(hash: Record<string, string>): Ceilings {
  const ceilings: Ceilings = {};
  for (const field of POLICY_FIELDS) {
    const value = hash[CEILING + field];
    if (value !== undefined) ceilings[field] = value === '' ? null : Number(value);
  }
  return ceilings;
}

export function projectFromHash(hash: Record<string, string>): ProjectRecord | null {
  if (!hash.id) return null;
  return {
    id: hash.id,
    name: hash.name!,
    environment: orNull(hash.environment),
    created_at: hash.created_at!,
    updated_at: hash.updated_at!,
    rate_limits: policyFromHash(hash),
    ceilings: ceilingsFromHash(hash),
    priority: priorityOrNull(hash.priority),
  };
}

export function principalToJson(principal: KeyPrincipal): string {
  return JSON.stringify(principal);
}

export function principalFromJson(json: string | null): KeyPrincipal | null {
  return json === null ? null : (JSON.parse(json) as KeyPrincipal);
}

export function auditToFields(event: AuditEvent): string[] {
  return Object.entries(event).flatMap(([field, value]) => [field, value === null ? '' : String(value)]);
}

export function auditFromFields(fields: string[]): AuditEvent {
  const entry: Record<string, string | null> = {};
  for (let i = 0; i < fields.length; i += 2) entry[fields[i]!] = orNull(fields[i + 1]);
  return entry as unknown as AuditEvent;
}
