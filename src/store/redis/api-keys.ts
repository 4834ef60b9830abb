import type { ApiKeyPatch, ApiKeyRecord, ApiKeyStore, AuditEvent, KeyPrincipal, NewKey } from '../types.js';
import { principalOfKey } from '../principal.js';
import type { RedisClient } from './connect.js';
import { execAll, guard } from './guard.js';
import type { KeyNames } from './key-names.js';
import { luaScript } from './lua-script.js';
import {
  apiKeyFromHash,
  apiKeyPatchToHash,
  apiKeyToHash,
  auditToFields,
  pairsToObject,
  principalFromJson,
  principalToJson,
  principalWithRecord,
  PRINCIPAL_RECORD_FIELDS,
} from './hash-codecs.js';

// An expired key's secret stays resolvable this long, so clients hear "expired" rather than "invalid".
const EXPIRED_KEY_MEMORY_MS = 30 * 24 * 3600 * 1000;
export const AUDIT_MAX_LENGTH = 10_000;

// The scripts' KEYS, ARGV and replies: the head of each .lua file.
const ROTATE_SCRIPT = luaScript(new URL('./rotate-key.lua', import.meta.url), { AUDIT_MAX_LENGTH });
const REVOKE_SCRIPT = luaScript(new URL('./revoke-key.lua', import.meta.url), { AUDIT_MAX_LENGTH });
const UPDATE_SCRIPT = luaScript(new URL('./update-key.lua', import.meta.url), { AUDIT_MAX_LENGTH });
const TOUCH_SCRIPT = luaScript(new URL('./touch-key.lua', import.meta.url));
const HASH_OF_SCRIPT = luaScript(new URL('./key-hash.lua', import.meta.url));

type Scripted = RedisClient & {
  novaRotateKey(record: string, index: string, audit: string, rotation: string): Promise<string | null>;
  novaRevokeKey(record: string, index: string, audit: string, revocation: string): Promise<string[] | null>;
  novaUpdateKey(record: string, audit: string, update: string): Promise<string[] | null>;
  novaTouchKey(...args: string[]): Promise<number>;
  novaHashOf(key: string): Promise<string | null>;
};

/**
 * Write order keeps every failure on the side of less access: a new secret is linked
 * only after its record exists, and a revoked secret is unlinked before its record goes.
 */
export class RedisApiKeyStore implements ApiKeyStore {
  private readonly redis: Scripted;

  constructor(
    redis: RedisClient,
    private readonly keys: KeyNames,
  ) {
    redis.defineCommand('novaRotateKey', { numberOfKeys: 3, lua: ROTATE_SCRIPT });
    redis.defineCommand('novaRevokeKey', { numberOfKeys: 3, lua: REVOKE_SCRIPT });
    redis.defineCommand('novaUpdateKey', { numberOfKeys: 2, lua: UPDATE_SCRIPT });
    redis.defineCommand('novaTouchKey', { numberOfKeys: 1, lua: TOUCH_SCRIPT });
    redis.defineCommand('novaHashOf', { numberOfKeys: 1, lua: HASH_OF_SCRIPT });
    this.redis = redis as Scripted;
  }

  /** The MULTI commands that write a key's record; used by project creation too. */
  queueRecord(multi: ReturnType<RedisClient['multi']>, { record, secretHash }: NewKey, audit: AuditEvent[]): void {
    multi.hset(this.keys.apiKey(record.project_id, record.id), apiKeyToHash(record, secretHash));
    multi.zadd(this.keys.apiKeyIndex(record.project_id), 0, record.id);
    for (const event of audit) {
      multi.xadd(this.keys.audit(record.project_id), 'MAXLEN', '~', AUDIT_MAX_LENGTH, '*', ...auditToFields(event));
    }
  }

  /** Links a secret hash to its key; if the record changed meanwhile (revoked), unlinks again. */
  async linkSecret(secretHash: string, principal: KeyPrincipal): Promise<void> {
    const until = principal.validUntilMs ?? (principal.expiresAtMs === null ? null : principal.expiresAtMs + EXPIRED_KEY_MEMORY_MS);
    const key = this.keys.secret(secretHash);
    await guard(
      until === null
        ? this.redis.set(key, principalToJson(principal))
        : this.redis.set(key, principalToJson(principal), 'PXAT', until),
    );
    if (principal.validUntilMs !== null) return;
    const current = await guard(this.redis.novaHashOf(this.keys.apiKey(principal.projectId, principal.keyId)));
    if (current !== secretHash) await guard(this.redis.del(key));
  }

  async unlinkSecrets(hashes: string[]): Promise<void> {
    await guard(Promise.all(hashes.map((hash) => this.redis.del(this.keys.secret(hash)))));
  }

  async create(key: NewKey, audit: AuditEvent): Promise<void> {
    const multi = this.redis.multi();
    this.queueRecord(multi, key, [audit]);
    await execAll(multi);
    try {
      await this.linkSecret(key.secretHash, principalOfKey(key.record));
    } catch (error) {
      await this.forget(key.record).catch(() => undefined);
      throw error;
    }
  }

  /** Undoes a create whose secret could not be linked. */
  async forget(record: ApiKeyRecord): Promise<void> {
    const multi = this.redis.multi();
    multi.del(this.keys.apiKey(record.project_id, record.id));
    multi.zrem(this.keys.apiKeyIndex(record.project_id), record.id);
    await execAll(multi);
  }

  async get(projectId: string, keyId: string): Promise<ApiKeyRecord | null> {
    return apiKeyFromHash(await guard(this.redis.hgetall(this.keys.apiKey(projectId, keyId))));
  }

  async list(projectId: string, limit: number, before: string | null) {
    const ids = await guard(
      this.redis.zrevrangebylex(this.keys.apiKeyIndex(projectId), before === null ? '+' : `(${before}`, '-', 'LIMIT', 0, limit + 1),
    );
    const pageIds = ids.slice(0, limit);
    const pipeline = this.redis.pipeline();
    pageIds.forEach((id) => pipeline.hgetall(this.keys.apiKey(projectId, id)));
    const results = pageIds.length ? await execAll(pipeline) : [];
    const data = results
      .map((hash) => apiKeyFromHash(hash as Record<string, string>))
      .filter((record): record is ApiKeyRecord => record !== null);
    return { data, hasMore: ids.length > limit };
  }

  async rotate(
    projectId: string,
    keyId: string,
    { hash: secretHash, redactedValue }: { hash: string; redactedValue: string },
    previousValidUntilMs: number | null,
    audit: AuditEvent,
  ) {
    const keep = previousValidUntilMs !== null;
    const result = await guard(
      this.redis.novaRotateKey(
        this.keys.apiKey(projectId, keyId),
        this.keys.apiKeyIndex(projectId),
        this.keys.audit(projectId),
        JSON.stringify({
          hash: secretHash,
          keepPrevious: keep,
          previousExpiresAt: keep ? new Date(previousValidUntilMs).toISOString() : '',
          redactedValue,
          audit: auditToFields(audit),
        }),
      ),
    );
    if (result === null) return null;
    const { previousHash: oldHash, olderHash, record: stored } = JSON.parse(result) as { previousHash: string; olderHash: string; record: Record<string, string> };
    const record = apiKeyFromHash(stored)!;
    await this.linkSecret(secretHash, principalOfKey(record));
    if (keep) await this.linkSecret(oldHash, principalOfKey(record, previousValidUntilMs));
    await this.unlinkSecrets([...(keep ? [] : [oldHash]), ...(olderHash ? [olderHash] : [])]);
    return { record, changedHashes: [oldHash, ...(olderHash ? [olderHash] : [])] };
  }

  /**
   * One script changes the record, so the change is all or nothing. A secret's principal reads the
   * scopes, models and expiry from the record (resolve, below), so nothing else has to follow; only
   * the TTL that keeps an expired secret resolvable is moved along with expires_at.
   */
  async update(projectId: string, keyId: string, patch: ApiKeyPatch, audit: AuditEvent) {
    const pairs = await guard(
      this.redis.novaUpdateKey(
        this.keys.apiKey(projectId, keyId),
        this.keys.audit(projectId),
        JSON.stringify({ fields: Object.entries(apiKeyPatchToHash(patch)).flat(), audit: auditToFields(audit) }),
      ),
    );
    if (pairs === null) return null;
    const stored = pairsToObject(pairs);
    const changedHashes = [stored.hash, stored.prev_hash].filter((hash): hash is string => Boolean(hash));
    if (patch.expires_at !== undefined && stored.hash) {
      const secret = this.keys.secret(stored.hash);
      await guard(
        patch.expires_at === null ? this.redis.persist(secret) : this.redis.pexpireat(secret, Date.parse(patch.expires_at) + EXPIRED_KEY_MEMORY_MS),
      );
    }
    return { record: apiKeyFromHash(stored)!, changedHashes };
  }

  async revoke(projectId: string, keyId: string, audit: AuditEvent) {
    const before = await guard(this.redis.hmget(this.keys.apiKey(projectId, keyId), 'hash', 'prev_hash'));
    const linked = before.filter((hash): hash is string => Boolean(hash));
    if (linked.length === 0) return null;
    await this.unlinkSecrets(linked);
    const pairs = await guard(
      this.redis.novaRevokeKey(
        this.keys.apiKey(projectId, keyId),
        this.keys.apiKeyIndex(projectId),
        this.keys.audit(projectId),
        JSON.stringify({ keyId, audit: auditToFields(audit) }),
      ),
    );
    if (pairs === null) return null;
    const stored = pairsToObject(pairs);
    // A rotation that raced this revoke may have linked a hash we did not see above.
    const late = [stored.hash, stored.prev_hash].filter((hash): hash is string => Boolean(hash) && !linked.includes(hash!));
    if (late.length) await this.unlinkSecrets(late);
    return { record: apiKeyFromHash(stored)!, changedHashes: [...linked, ...late] };
  }

  /**
   * The secret's principal, with the scopes, models, priority and expiry its record holds now: the record is
   * their one copy, so a PATCH changes them atomically. A second read, but only on a key cache miss
   * (src/auth/key-cache.ts).
   */
  async resolve(secretHash: string): Promise<KeyPrincipal | null> {
    const principal = principalFromJson(await guard(this.redis.get(this.keys.secret(secretHash))));
    if (principal === null) return null;
    const fields = await guard(this.redis.hmget(this.keys.apiKey(principal.projectId, principal.keyId), ...PRINCIPAL_RECORD_FIELDS));
    return principalWithRecord(principal, fields);
  }

  async touch(projectId: string, keyId: string, at: string): Promise<void> {
    await guard(this.redis.novaTouchKey(this.keys.apiKey(projectId, keyId), at));
  }
}
