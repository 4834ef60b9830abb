import { Type } from 'typebox';
import { redactSecret } from '../../auth/key-format.js';
import { Nullable, IsoTime } from '../../http/schemas.js';
import { mintId } from '../../core/ids.js';
import type { ApiKeyRecord } from '../../store/types.js';
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

/** Fields a create and a PATCH take (PATCH: each optional). */
export const KeyPolicyFields = {
  models: Type.Optional(Nullable(KeyModels)),
  scopes: Type.Optional(KeyScopes),
  metadata: Type.Optional(KeyMetadata),
};

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
  };
}

export interface KeyPolicy {
  models: string[] | null;
  scopes: string[];
  metadata: Record<string, string>;
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
  };
  return { secret, key: { record, secretHash: hashSecret(secret) } };
}
