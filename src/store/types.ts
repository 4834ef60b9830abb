import type { KeyLimits } from './quota-types.js';
import type { ResponseOwnerStore } from './response-types.js';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { QuotaStore } from './quota-types.js';
import type { UsageStore } from './usage-types.js';
import type { ConversationStore } from './conversation-types.js';
import type { RecordStore } from './record-types.js';
import type { AlertStore } from './alert-types.js';
import type { AuditEvent } from './audit-types.js';
import type { Ceilings, PolicyPatch, Priority, RateLimitPolicy } from './policy.js';

export type * from './conversation-types.js';
export type { AuditAction, AuditEvent } from './audit-types.js';

/** The Store: every piece of shared state, one interface, a Redis and an in-memory implementation. */

export type { RateLimitPolicy, Ceilings, PolicyPatch, PolicyField, Priority } from './policy.js';

export interface ProjectRecord {
  id: string;
  name: string;
  environment: string | null;
  created_at: string;
  updated_at: string;
  rate_limits: RateLimitPolicy;
  /** The ceilings the admin set for this project (others: the config's). */
  ceilings: Ceilings;
  /** Its queue priority, set by the admin; null: none (normal). */
  priority: Priority | null;
}

export interface ApiKeyRecord {
  id: string;
  project_id: string;
  name: string;
  redacted_value: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  previous_secret_expires_at: string | null;
  /** Allowed public model ids, `*` globs; null: every model. */
  models: string[] | null;
  /** Null for a key stored before scopes existed: it has them all (src/auth/key-access.ts). */
  scopes: string[] | null;
  /** Owner/team labels: at most 16 entries. */
  metadata: Record<string, string>;
  /** The key's own rate_limits and budgets (each null: none; absent: a key stored before them, none). */
  limits?: KeyLimits;
  /** The key's own queue priority; null: it follows its project's. */
  priority: Priority | null;
}

/** What `PATCH /v1/api-keys/{id}` changes: only the fields given. */
export interface ApiKeyPatch {
  name?: string;
  expires_at?: string | null;
  models?: string[] | null;
  scopes?: string[] | null;
  metadata?: Record<string, string>;
  /** The limits to change (null: remove that limit); the others stay. */
  limits?: Partial<KeyLimits>;
  /** null: the key follows its project's priority. */
  priority?: Priority | null;
}

/** What authentication needs of a key, denormalised under the secret's hash so one read resolves it. */
export interface KeyPrincipal {
  keyId: string;
  projectId: string;
  /** The key's own expiry (expires_at), epoch ms. */
  expiresAtMs: number | null;
  /** For a rotated-out previous secret: the end of its grace period, epoch ms. */
  validUntilMs: number | null;
  /** The key's scopes and models as its record holds them now; absent or null: all. */
  scopes?: string[] | null;
  models?: string[] | null;
  /** The key has limits of its own (rate_limits or budgets): its requests pass its level too. */
  limited?: boolean;
  /** The key's own queue priority as its record holds it now; null: it follows its project's. */
  priority: Priority | null;
}

export interface NewKey {
  record: ApiKeyRecord;
  secretHash: string;
}

export interface KeyPage {
  data: ApiKeyRecord[];
  hasMore: boolean;
}

export interface ProjectStore {
  /** Creates a project together with its first key, all or nothing. */
  create(project: ProjectRecord, firstKey: NewKey, audit: AuditEvent[]): Promise<void>;
  get(projectId: string): Promise<ProjectRecord | null>;
  /** Replaces name and environment; null when the project does not exist. */
  replace(projectId: string, settings: ProjectSettings, audit: AuditEvent): Promise<ProjectRecord | null>;
  /** Changes the given policy fields and ceilings; the next admission on every replica uses them. */
  updatePolicy(projectId: string, patch: PolicyPatch, updatedAt: string, audit: AuditEvent): Promise<ProjectRecord | null>;
  /** Projects newest first, after the project id `after` (null: from the newest). */
  list(limit: number, after: string | null): Promise<{ data: ProjectRecord[]; hasMore: boolean }>;
  /** Live (not revoked) keys of a project. */
  keyCount(projectId: string): Promise<number>;
  /**
   * Deletes a project: its keys stop resolving, and everything it stored goes, except its usage
   * buckets (they expire with their retention) and its audit trail (kept `retainAuditMs` more, with
   * the deletion in it). Returns the secret hashes to invalidate on every replica, or null when
   * there is no such project.
   */
  delete(projectId: string, audit: AuditEvent, retainAuditMs: number): Promise<{ secretHashes: string[] } | null>;
}

export interface ProjectSettings {
  name: string;
  environment: string | null;
  updated_at: string;
}

export interface ApiKeyStore {
  create(key: NewKey, audit: AuditEvent): Promise<void>;
  get(projectId: string, keyId: string): Promise<ApiKeyRecord | null>;
  /** Newest first; `before` is the id of the last key of the previous page. */
  list(projectId: string, limit: number, before: string | null): Promise<KeyPage>;
  /**
   * Gives the key a new secret (its hash and redacted form). The old hash stays valid until `previousValidUntilMs`
   * (null: invalid at once). Returns the updated record and every hash that stopped
   * being what it was, or null when the key does not exist.
   */
  rotate(
    projectId: string,
    keyId: string,
    secret: { hash: string; redactedValue: string },
    previousValidUntilMs: number | null,
    audit: AuditEvent,
  ): Promise<{ record: ApiKeyRecord; changedHashes: string[] } | null>;
  /**
   * Changes the given fields, all or nothing. Returns the updated record and its secret hashes (to
   * invalidate on every replica), or null when the key does not exist.
   */
  update(projectId: string, keyId: string, patch: ApiKeyPatch, audit: AuditEvent): Promise<{ record: ApiKeyRecord; changedHashes: string[] } | null>;
  /** Deletes the key; returns its last record and the hashes that no longer authenticate. */
  revoke(projectId: string, keyId: string, audit: AuditEvent): Promise<{ record: ApiKeyRecord; changedHashes: string[] } | null>;
  resolve(secretHash: string): Promise<KeyPrincipal | null>;
  touch(projectId: string, keyId: string, at: string): Promise<void>;
}

export interface AuditStore {
  list(projectId: string, limit: number): Promise<AuditEvent[]>;
}

/** Cross-replica notices that cached auth entries are stale. */
export interface InvalidationBus {
  publish(secretHashes: string[]): Promise<void>;
  /** `onReset` runs when messages may have been missed (reconnect): drop the whole cache. */
  subscribe(onHashes: (hashes: string[]) => void, onReset: () => void): void;
}

export interface LimiterOptions {
  keyPrefix: string;
  points: number;
  durationSeconds: number;
  blockDurationSeconds?: number;
}

export interface Store {
  readonly kind: 'redis' | 'memory';
  readonly projects: ProjectStore;
  readonly apiKeys: ApiKeyStore;
  readonly audit: AuditStore;
  readonly invalidation: InvalidationBus;
  readonly records: RecordStore;
  /** Per-project admission (sliding window + burst) and usage buckets: src/store/quota-types.ts and usage-types.ts. */
  readonly quota: QuotaStore;
  readonly usage: UsageStore;
  readonly conversations: ConversationStore;
  /** Who owns each upstream-stored Responses API object. */
  readonly responses: ResponseOwnerStore;
  /** Webhooks, the alert event stream and webhook deliveries (src/alerts/). */
  readonly alerts: AlertStore;
  /** A rate-limiter-flexible limiter shared by all replicas (in-process for the memory store). */
  createLimiter(options: LimiterOptions): RateLimiterAbstract;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Thrown by a store when its backend cannot be reached or answered too late. */
export class StoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super('store unavailable', { cause });
    this.name = 'StoreUnavailableError';
  }
}
