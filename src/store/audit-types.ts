/** One entry of a project's audit log: who changed what, from where (GET /v1/projects/{id}/audit). */

export type AuditAction =
  | 'project.create'
  | 'project.update'
  | 'project.delete'
  | 'project.rate_limits.update'
  | 'project.ceilings.update'
  | 'api_key.create'
  | 'api_key.rotate'
  | 'api_key.update'
  | 'api_key.revoke'
  | 'webhook.create'
  | 'webhook.delete';

export interface AuditEvent {
  action: AuditAction;
  project_id: string;
  key_id: string | null;
  at: string;
  actor: 'admin' | 'api_key';
  actor_key_id: string | null;
  client_address: string;
  request_id: string;
  reason: string | null;
}
