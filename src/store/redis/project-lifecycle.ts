import { Cluster } from 'ioredis';
import type { AuditEvent, ProjectRecord } from '../types.js';
import { AUDIT_MAX_LENGTH, type RedisApiKeyStore } from './api-keys.js';
import type { RedisClient } from './connect.js';
import { guard } from './guard.js';
import type { KeyNames } from './key-names.js';
import { auditToFields, projectFromHash } from './hash-codecs.js';

const SCAN_BATCH = 1000;

/**
 * Listing and deleting projects. A project's data is every key under its `{project_id}` hash tag;
 * deleting walks them with SCAN (on every master of a Cluster) rather than keeping an index of
 * every conversation and record, since deletion is rare and administrative.
 */
export class RedisProjectLifecycle {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeyNames,
    private readonly apiKeys: RedisApiKeyStore,
  ) {}

  async list(limit: number, after: string | null): Promise<{ data: ProjectRecord[]; hasMore: boolean }> {
    await this.backfillIndex();
    const ids = await guard(this.redis.zrevrangebylex(this.keys.projectIndex(), after === null ? '+' : `(${after}`, '-', 'LIMIT', 0, limit + 1));
    const page = ids.slice(0, limit);
    // One command per project (a Cluster routes each to its slot); no cross-slot pipeline.
    const hashes = await guard(Promise.all(page.map((id) => this.redis.hgetall(this.keys.project(id)))));
    return { data: hashes.map(projectFromHash).filter((project): project is ProjectRecord => project !== null), hasMore: ids.length > limit };
  }

  keyCount(projectId: string): Promise<number> {
    return guard(this.redis.zcard(this.keys.apiKeyIndex(projectId)));
  }

  async delete(projectId: string, audit: AuditEvent, retainAuditMs: number): Promise<{ secretHashes: string[] } | null> {
    const projectKey = this.keys.project(projectId);
    if ((await guard(this.redis.exists(projectKey))) === 0) return null;
    // Access goes first: unlinked secrets stop resolving before anything else is touched.
    const keyIds = await guard(this.redis.zrange(this.keys.apiKeyIndex(projectId), 0, -1));
    const linked = await guard(Promise.all(keyIds.map((keyId) => this.redis.hmget(this.keys.apiKey(projectId, keyId), 'hash', 'prev_hash'))));
    const secretHashes = linked.flat().filter((hash): hash is string => Boolean(hash));
    await this.apiKeys.unlinkSecrets(secretHashes);
    await guard(this.redis.zrem(this.keys.projectIndex(), projectId));
    const auditKey = this.keys.audit(projectId);
    // Usage buckets stay for their retention (they expire by themselves); storage totals do not.
    const prefix = this.keys.projectKeyPrefix(projectId);
    const bucketPrefixes = ['usage:m:', 'usage:h:'].map((unit) => `${prefix}${unit}`);
    const kept = (key: string) => key === auditKey || bucketPrefixes.some((prefix) => key.startsWith(prefix));
    for (const node of this.masters()) {
      let cursor = '0';
      do {
        const [next, found] = await guard(node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', SCAN_BATCH));
        cursor = next;
        const doomed = found.filter((key) => !kept(key));
        if (doomed.length > 0) await guard(node.unlink(...doomed));
      } while (cursor !== '0');
    }
    await guard(this.redis.xadd(auditKey, 'MAXLEN', '~', AUDIT_MAX_LENGTH, '*', ...auditToFields(audit)));
    await guard(this.redis.pexpire(auditKey, retainAuditMs));
    return { secretHashes };
  }

  private masters(): RedisClient[] {
    return this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
  }

  /** Projects created before the index existed are added to it once, on the first listing. */
  private async backfillIndex(): Promise<void> {
    const index = this.keys.projectIndex();
    if ((await guard(this.redis.exists(index))) === 1) return;
    const suffix = ':project';
    for (const node of this.masters()) {
      let cursor = '0';
      do {
        const [next, found] = await guard(node.scan(cursor, 'MATCH', this.keys.project('*'), 'COUNT', SCAN_BATCH));
        cursor = next;
        const ids = found.map((key) => key.slice(key.indexOf('{') + 1, key.length - suffix.length - 1));
        if (ids.length > 0) await guard(this.redis.zadd(index, ...ids.flatMap((id) => [0, id])));
      } while (cursor !== '0');
    }
  }
}
