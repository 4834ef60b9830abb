import type { ApiKeyRecord, KeyPrincipal } from './types.js';

export const principalOfKey = (record: ApiKeyRecord, validUntilMs: number | null = null): KeyPrincipal => ({
  keyId: record.id,
  projectId: record.project_id,
  expiresAtMs: record.expires_at === null ? null : Date.parse(record.expires_at),
  validUntilMs,
  scopes: record.scopes,
  models: record.models,
});
