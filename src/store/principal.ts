import type { ApiKeyRecord, KeyPrincipal } from './types.js';
import type { KeyLimits } from './quota-types.js';

/** Whether a key has any limit of its own (only then does its admission do key-level work). */
export const hasKeyLimits = (limits: Partial<KeyLimits> | undefined): boolean =>
  limits !== undefined && Object.values(limits).some((value) => value !== null && value !== undefined);

export const principalOfKey = (record: ApiKeyRecord, validUntilMs: number | null = null): KeyPrincipal => ({
  keyId: record.id,
  projectId: record.project_id,
  expiresAtMs: record.expires_at === null ? null : Date.parse(record.expires_at),
  validUntilMs,
  scopes: record.scopes,
  models: record.models,
  limited: hasKeyLimits(record.limits),
  priority: record.priority ?? null,
});
