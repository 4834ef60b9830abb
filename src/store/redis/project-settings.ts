import type { AuditEvent, PolicyPatch, ProjectRecord, ProjectSettings } from '../types.js';
import { AUDIT_MAX_LENGTH } from './api-keys.js';
import type { RedisClient } from './connect.js';
import { guard } from './guard.js';
import type { KeyNames } from './key-names.js';
import { luaScript } from './lua-script.js';
import { auditToFields, pairsToObject, policyPatchToHash, projectFromHash } from './hash-codecs.js';

/** Changes fields of an existing project and appends the audit entry, atomically: update-project.lua. */
const UPDATE_SCRIPT = luaScript(new URL('./update-project.lua', import.meta.url), { AUDIT_MAX_LENGTH });

type Scripted = RedisClient & { novaUpdateProject(project: string, audit: string, update: string): Promise<string[] | null> };

/** PUT /v1/projects/{id}, PATCH …/rate-limits and the admin's policy and ceiling changes on Redis. */
export class RedisProjectSettings {
  private readonly redis: Scripted;

  constructor(
    redis: RedisClient,
    private readonly keys: KeyNames,
  ) {
    redis.defineCommand('novaUpdateProject', { numberOfKeys: 2, lua: UPDATE_SCRIPT });
    this.redis = redis as Scripted;
  }

  replace(projectId: string, settings: ProjectSettings, audit: AuditEvent): Promise<ProjectRecord | null> {
    return this.update(projectId, { name: settings.name, environment: settings.environment ?? '', updated_at: settings.updated_at }, audit);
  }

  updatePolicy(projectId: string, patch: PolicyPatch, updatedAt: string, audit: AuditEvent): Promise<ProjectRecord | null> {
    return this.update(projectId, { ...policyPatchToHash(patch), updated_at: updatedAt }, audit);
  }

  private async update(projectId: string, fields: Record<string, string>, audit: AuditEvent): Promise<ProjectRecord | null> {
    const update = JSON.stringify({ fields, audit: auditToFields(audit) });
    const result = await guard(this.redis.novaUpdateProject(this.keys.project(projectId), this.keys.audit(projectId), update));
    return result === null ? null : projectFromHash(pairsToObject(result));
  }
}
