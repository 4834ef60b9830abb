import type { AuditEvent, NewKey, PolicyPatch, ProjectRecord, ProjectSettings, ProjectStore } from '../types.js';
import { RedisProjectLifecycle } from './project-lifecycle.js';
import { RedisProjectSettings } from './project-settings.js';
import { principalOfKey } from '../principal.js';
import type { RedisApiKeyStore } from './api-keys.js';
import type { RedisClient } from './connect.js';
import { execAll, guard } from './guard.js';
import type { KeyNames } from './key-names.js';
import { projectFromHash, projectToHash } from './hash-codecs.js';

export class RedisProjectStore implements ProjectStore {
  private readonly settings: RedisProjectSettings;
  private readonly lifecycle: RedisProjectLifecycle;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeyNames,
    private readonly apiKeys: RedisApiKeyStore,
  ) {
    this.settings = new RedisProjectSettings(redis, keys);
    this.lifecycle = new RedisProjectLifecycle(redis, keys, apiKeys);
  }

  list(limit: number, after: string | null): Promise<{ data: ProjectRecord[]; hasMore: boolean }> {
    return this.lifecycle.list(limit, after);
  }

  keyCount(projectId: string): Promise<number> {
    return this.lifecycle.keyCount(projectId);
  }

  delete(projectId: string, audit: AuditEvent, retainAuditMs: number): Promise<{ secretHashes: string[] } | null> {
    return this.lifecycle.delete(projectId, audit, retainAuditMs);
  }

  replace(projectId: string, settings: ProjectSettings, audit: AuditEvent): Promise<ProjectRecord | null> {
    return this.settings.replace(projectId, settings, audit);
  }

  updatePolicy(projectId: string, patch: PolicyPatch, updatedAt: string, audit: AuditEvent): Promise<ProjectRecord | null> {
    return this.settings.updatePolicy(projectId, patch, updatedAt, audit);
  }

  async create(project: ProjectRecord, firstKey: NewKey, audit: AuditEvent[]): Promise<void> {
    const multi = this.redis.multi();
    multi.hset(this.keys.project(project.id), projectToHash(project));
    this.apiKeys.queueRecord(multi, firstKey, audit);
    await execAll(multi);
    await guard(this.redis.zadd(this.keys.projectIndex(), 0, project.id));
    try {
      await this.apiKeys.linkSecret(firstKey.secretHash, principalOfKey(firstKey.record));
    } catch (error) {
      await guard(this.redis.del(this.keys.project(project.id), this.keys.apiKey(project.id, firstKey.record.id), this.keys.apiKeyIndex(project.id))).catch(
        () => undefined,
      );
      await guard(this.redis.zrem(this.keys.projectIndex(), project.id)).catch(() => undefined);
      throw error;
    }
  }

  async get(projectId: string): Promise<ProjectRecord | null> {
    return projectFromHash(await guard(this.redis.hgetall(this.keys.project(projectId))));
  }
}
