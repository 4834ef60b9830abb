import type { FastifyRequest } from 'fastify';
import type { AuditAction, AuditEvent } from '../store/types.js';

/** An audit entry for what this request did; never carries a secret. */
export function auditEvent(
  request: FastifyRequest,
  action: AuditAction,
  projectId: string,
  keyId: string | null,
  now: number,
  reason: string | null = null,
): AuditEvent {
  return {
    action,
    project_id: projectId,
    key_id: keyId,
    at: new Date(now).toISOString(),
    actor: request.principal ? 'api_key' : 'admin',
    actor_key_id: request.principal?.keyId ?? null,
    client_address: request.ip,
    request_id: request.id,
    reason,
  };
}
