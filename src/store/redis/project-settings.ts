import type { AuditEvent, PolicyPatch, ProjectRecord, ProjectSettings } from '../types.js';
import { AUDIT_MAX_LENGTH } from './api-keys.js';
import type { RedisClient } from './connect.js';
import { guard } from './guard.js';
import type { KeyNames } from './key-names.js';
import { auditToFields, pairsToObject, policyPatchToHash, projectFromHash } from './hash-codecs.js';

/**
 * Changes fields of an existing project and appends the audit entry, atomically; a
 * missing project stays missing (no partial record is created).
 * KEYS: project hash, audit stream. ARGV: number of field/value pairs, the pairs, audit fields…
 */
const UPDATE_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local n = tonumber(ARGV[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2, 1 + n * 2))
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ${AUDIT_MAX_LENGTH}, '*', unpack(ARGV, 2 + n * 2))
return redis.call('HGETALL', KEYS[1])
`;

type Scripted = RedisClient & { novaUpdateProject(...args: (string | number)[]): Promise<string[] | null> };

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
    const pairs = Object.entries(fields).flat();
    const result = await guard(
      this.redis.novaUpdateProject(this.keys.project(projectId), this.keys.audit(projectId), pairs.length / 2, ...pairs, ...auditToFields(audit)),
    );
    return result === null ? null : projectFromHash(pairsToObject(result));
  }
}
