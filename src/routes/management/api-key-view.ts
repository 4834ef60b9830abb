import { Type } from 'typebox';
import { redactSecret } from '../../auth/key-format.js';
import { Nullable, IsoTime } from '../../http/schemas.js';
import { mintId } from '../../core/ids.js';
import type { ApiKeyRecord } from '../../store/types.js';
import { generateSecret, hashSecret } from '../../auth/key-format.js';

/** An API key as clients see it: metadata only, never the secret or its hash. */
export const ApiKeyFields = {
  name: Type.String(),
  project_id: Type.String(),
  redacted_value: Type.String(),
  created_at: IsoTime,
  expires_at: Nullable(IsoTime),
  last_used_at: Nullable(IsoTime),
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
  };
}

/** A fresh key: its record, the hash to store and the secret to show once. */
export function mintApiKey(projectId: string, name: string, expiresAt: string | null, now: number) {
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
  };
  return { secret, key: { record, secretHash: hashSecret(secret) } };
}
