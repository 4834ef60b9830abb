import { NO_KEY_LIMITS, type KeyLimits } from '../quota-types.js';
import { MemoryResponseOwnerStore } from './response-owners.js';
import { EventEmitter } from 'node:events';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { principalOfKey } from '../principal.js';
import { MemoryQuotaStore } from './memory-quota.js';
import { MemoryUsageStore } from './memory-usage.js';
import { MemoryConversationStore } from './conversations.js';
import { MemoryRecordStore } from './memory-record-store.js';
import { MemoryAlertStore } from './memory-alerts.js';
import { CROSSING_MARKER_MS } from '../alert-types.js';
import type {
  ApiKeyRecord,
  ApiKeyStore,
  AuditEvent,
  AuditStore,
  InvalidationBus,
  KeyPrincipal,
  LimiterOptions,
  NewKey,
  ProjectRecord,
  ProjectStore,
  Store,
} from '../types.js';

const AUDIT_LIMIT = 10_000;

interface StoredKey {
  record: ApiKeyRecord;
  hash: string;
  previousHash: string | null;
}

const clone = <T>(value: T): T => structuredClone(value);

/** One process, nothing persisted: for trying the gateway out and for single-replica tests. */
export class MemoryStore implements Store {
  readonly kind = 'memory' as const;
  private readonly projectsById = new Map<string, ProjectRecord>();
  private readonly keysByProject = new Map<string, Map<string, StoredKey>>();
  private readonly principals = new Map<string, KeyPrincipal>();
  private readonly auditByProject = new Map<string, AuditEvent[]>();
  private readonly bus = new EventEmitter();
  readonly alerts = new MemoryAlertStore(Date.now, (event) => this.appendAudit(event));
  readonly quota = new MemoryQuotaStore(
    (projectId) => this.projectsById.get(projectId)?.rate_limits,
    Date.now,
    (projectId, keyId) => {
      // As quota-batch.lua reads a key's record: a key without limits (or gone) has them all null.
      return clone(this.keysByProject.get(projectId)?.get(keyId)?.record.limits ?? NO_KEY_LIMITS);
    },
    {
      thresholdsOf: (projectId) => this.alerts.ownThresholds(projectId),
      emit: (event) => void this.alerts.appendOnce(`crossing:${event.id}`, CROSSING_MARKER_MS, event),
    },
    (projectId) => this.projectsById.get(projectId)?.priority ?? null,
  );
  readonly usage = new MemoryUsageStore(Date.now, (projectId, corrections) => this.quota.correctBudgets(projectId, corrections));
  readonly conversations = new MemoryConversationStore(
    Date.now,
    (projectId, id, bytes, expiresAtMs) => this.usage.trackExpiry(projectId, id, bytes, expiresAtMs),
    (projectId, id) => this.usage.untrackExpiry(projectId, id),
    (projectId) => this.projectsById.has(projectId),
  );
  readonly records = new MemoryRecordStore();
  readonly responses = new MemoryResponseOwnerStore();

  readonly projects: ProjectStore = {
    create: async (project, firstKey, audit) => {
      this.projectsById.set(project.id, clone(project));
      this.insertKey(firstKey);
      audit.forEach((event) => this.appendAudit(event));
    },
    get: async (projectId) => {
      const project = this.projectsById.get(projectId);
      return project ? clone(project) : null;
    },
    replace: async (projectId, settings, audit) => {
      const project = this.projectsById.get(projectId);
      if (!project) return null;
      Object.assign(project, settings);
      this.appendAudit(audit);
      return clone(project);
    },
    updatePolicy: async (projectId, patch, updatedAt, audit) => {
      const project = this.projectsById.get(projectId);
      if (!project) return null;
      project.rate_limits = { ...project.rate_limits, ...patch.rate_limits };
      project.ceilings = { ...project.ceilings, ...patch.ceilings };
      if (patch.priority !== undefined) project.priority = patch.priority;
      project.updated_at = updatedAt;
      this.appendAudit(audit);
      return clone(project);
    },
    list: async (limit, after) => {
      const ids = [...this.projectsById.keys()].filter((id) => after === null || id < after).sort().reverse();
      return { data: ids.slice(0, limit).map((id) => clone(this.projectsById.get(id)!)), hasMore: ids.length > limit };
    },
    keyCount: async (projectId) => this.keysByProject.get(projectId)?.size ?? 0,
    delete: async (projectId, audit) => {
      if (!this.projectsById.delete(projectId)) return null;
      this.alerts.dropProject(projectId);
      const secretHashes: string[] = [];
      for (const stored of this.keysByProject.get(projectId)?.values() ?? []) {
        secretHashes.push(stored.hash, ...(stored.previousHash ? [stored.previousHash] : []));
      }
      secretHashes.forEach((hash) => this.principals.delete(hash));
      this.keysByProject.delete(projectId);
      for (const scoped of [this.conversations, this.records, this.responses, this.quota]) scoped.forgetProject(projectId);
      this.appendAudit(audit);
      return { secretHashes };
    },
  };

  readonly apiKeys: ApiKeyStore = {
    create: async (key, audit) => {
      this.insertKey(key);
      this.appendAudit(audit);
    },
    get: async (projectId, keyId) => {
      const stored = this.keysByProject.get(projectId)?.get(keyId);
      return stored ? clone(stored.record) : null;
    },
    list: async (projectId, limit, before) => {
      const ids = [...(this.keysByProject.get(projectId)?.keys() ?? [])]
        .filter((id) => before === null || id < before)
        .sort()
        .reverse();
      const keys = this.keysByProject.get(projectId)!;
      const page = ids.slice(0, limit).map((id) => clone(keys.get(id)!.record));
      return { data: page, hasMore: ids.length > limit };
    },
    rotate: async (projectId, keyId, { hash: secretHash, redactedValue }, previousValidUntilMs, audit) => {
      const stored = this.keysByProject.get(projectId)?.get(keyId);
      if (!stored) return null;
      const changedHashes = [stored.hash];
      if (stored.previousHash) {
        this.principals.delete(stored.previousHash);
        changedHashes.push(stored.previousHash);
      }
      const current = this.principals.get(stored.hash)!;
      if (previousValidUntilMs === null) {
        this.principals.delete(stored.hash);
        stored.previousHash = null;
      } else {
        this.principals.set(stored.hash, { ...current, validUntilMs: previousValidUntilMs });
        stored.previousHash = stored.hash;
      }
      this.principals.set(secretHash, { ...current, validUntilMs: null });
      stored.hash = secretHash;
      stored.record.redacted_value = redactedValue;
      stored.record.previous_secret_expires_at =
        previousValidUntilMs === null ? null : new Date(previousValidUntilMs).toISOString();
      this.appendAudit(audit);
      return { record: clone(stored.record), changedHashes };
    },
    update: async (projectId, keyId, patch, audit) => {
      const stored = this.keysByProject.get(projectId)?.get(keyId);
      if (!stored) return null;
      const { limits, ...rest } = patch;
      const fields = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== undefined));
      Object.assign(stored.record, clone(fields));
      // Only the limits given change (null removes one), as the Redis record's fields do.
      if (limits !== undefined) {
        const merged = { ...NO_KEY_LIMITS, ...stored.record.limits };
        for (const [field, value] of Object.entries(limits)) if (value !== undefined) merged[field as keyof KeyLimits] = value;
        stored.record.limits = merged;
      }
      this.appendAudit(audit);
      return { record: clone(stored.record), changedHashes: [stored.hash, ...(stored.previousHash ? [stored.previousHash] : [])] };
    },
    revoke: async (projectId, keyId, audit) => {
      const keys = this.keysByProject.get(projectId);
      const stored = keys?.get(keyId);
      if (!keys || !stored) return null;
      keys.delete(keyId);
      const changedHashes = [stored.hash, ...(stored.previousHash ? [stored.previousHash] : [])];
      changedHashes.forEach((hash) => this.principals.delete(hash));
      this.appendAudit(audit);
      return { record: clone(stored.record), changedHashes };
    },
    resolve: async (secretHash) => {
      const principal = this.principals.get(secretHash);
      if (!principal) return null;
      if (principal.validUntilMs !== null && principal.validUntilMs <= Date.now()) {
        this.principals.delete(secretHash);
        return null;
      }
      // Scopes, models, priority and expiry as the record holds them now (a PATCH changes only the record).
      const record = this.keysByProject.get(principal.projectId)?.get(principal.keyId)?.record;
      if (!record) return null;
      const { expiresAtMs, scopes, models, limited, priority } = principalOfKey(record);
      return { ...principal, expiresAtMs, scopes: clone(scopes), models: clone(models), limited, priority };
    },
    touch: async (projectId, keyId, at) => {
      const stored = this.keysByProject.get(projectId)?.get(keyId);
      if (stored) stored.record.last_used_at = at;
    },
  };

  readonly audit: AuditStore = {
    list: async (projectId, limit) => clone((this.auditByProject.get(projectId) ?? []).slice(-limit).reverse()),
  };

  readonly invalidation: InvalidationBus = {
    publish: async (hashes) => {
      this.bus.emit('hashes', hashes);
    },
    subscribe: (onHashes) => {
      this.bus.on('hashes', onHashes);
    },
  };

  createLimiter(options: LimiterOptions) {
    return new RateLimiterMemory({
      keyPrefix: options.keyPrefix,
      points: options.points,
      duration: options.durationSeconds,
      blockDuration: options.blockDurationSeconds ?? 0,
    });
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.bus.removeAllListeners();
  }

  private insertKey({ record, secretHash }: NewKey): void {
    let keys = this.keysByProject.get(record.project_id);
    if (!keys) this.keysByProject.set(record.project_id, (keys = new Map()));
    keys.set(record.id, { record: clone(record), hash: secretHash, previousHash: null });
    this.principals.set(secretHash, principalOfKey(record));
  }

  private appendAudit(event: AuditEvent): void {
    let events = this.auditByProject.get(event.project_id);
    if (!events) this.auditByProject.set(event.project_id, (events = []));
    events.push(clone(event));
    if (events.length > AUDIT_LIMIT) events.splice(0, events.length - AUDIT_LIMIT);
  }
}
