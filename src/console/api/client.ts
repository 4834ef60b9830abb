import { query, request } from './http.js';
import type { ApiKey, KeyCreateBody, NewApiKey, NewProject, Page, PolicyPatch, Priority, Project, Role, Session, Usage, UsageQuery, Webhook, WebhookDelivery } from './types.js';

/** Session calls (src/routes/console*.ts on the server). */
export const sessionApi = {
  signIn: (token: string) => request<Session>('POST', '/console/session', { token }, { quietUnauthorized: true }),
  current: () => request<Session>('GET', '/console/session', undefined, { quietUnauthorized: true }),
  signOut: () => request<void>('DELETE', '/console/session', undefined, { quietUnauthorized: true }),
};

const enc = encodeURIComponent;

/**
 * The calls of one signed-in role: the admin reaches every project through /admin/v1, a key its own
 * project through /v1 (the same bodies and answers, so the pages do not care which).
 */
export interface ConsoleApi {
  role: Role;
  listProjects(cursor?: string): Promise<Page<Project>>;
  createProject(body: { name: string; environment?: string }): Promise<NewProject>;
  deleteProject(projectId: string): Promise<unknown>;
  getProject(projectId: string): Promise<Project>;
  /** The admin sets any policy, ceilings and priority; a key its rate limits within its ceilings. */
  updatePolicy(projectId: string, patch: PolicyPatch & { ceilings?: PolicyPatch; priority?: Priority | null }): Promise<unknown>;
  /** Name and environment: a key with project:write (the admin API has no such call). */
  updateSettings(projectId: string, body: { name: string; environment: string | null }): Promise<unknown>;
  listKeys(projectId: string, cursor?: string): Promise<Page<ApiKey>>;
  createKey(projectId: string, body: KeyCreateBody): Promise<NewApiKey>;
  rotateKey(projectId: string, keyId: string, gracePeriodSeconds: number): Promise<NewApiKey>;
  revokeKey(projectId: string, keyId: string): Promise<unknown>;
  usage(projectId: string, usageQuery: UsageQuery): Promise<Usage>;
  webhookDeliveries(projectId: string): Promise<{ data: WebhookDelivery[] }>;
  webhooks(projectId: string): Promise<{ data: Webhook[] }>;
}

function adminApi(): ConsoleApi {
  const project = (id: string) => `/admin/v1/projects/${enc(id)}`;
  const key = (projectId: string, keyId: string) => `${project(projectId)}/api-keys/${enc(keyId)}`;
  return {
    role: 'admin',
    listProjects: (cursor) => request('GET', `/admin/v1/projects${query({ limit: 100, cursor })}`),
    createProject: (body) => request('POST', '/admin/v1/projects', body),
    deleteProject: (id) => request('DELETE', project(id)),
    getProject: (id) => request('GET', project(id)),
    updatePolicy: (id, patch) => request('PATCH', project(id), patch),
    updateSettings: () => Promise.reject(new Error('The admin API does not rename projects.')),
    listKeys: (id, cursor) => request('GET', `${project(id)}/api-keys${query({ limit: 100, cursor })}`),
    createKey: (id, body) => request('POST', `${project(id)}/api-keys`, body),
    rotateKey: (id, keyId, grace) => request('PUT', key(id, keyId), { grace_period_seconds: grace }),
    revokeKey: (id, keyId) => request('DELETE', key(id, keyId)),
    usage: (id, usageQuery) => request('GET', `${project(id)}/usage${query({ ...usageQuery })}`),
    webhookDeliveries: (id) => request('GET', `/admin/v1/webhook-deliveries${query({ project_id: id, limit: 100 })}`),
    webhooks: (id) => request('GET', `${project(id)}/webhooks`),
  };
}

function keyApi(): ConsoleApi {
  const project = (id: string) => `/v1/projects/${enc(id)}`;
  const key = (keyId: string) => `/v1/api-keys/${enc(keyId)}`;
  const operatorsOnly = () => Promise.reject(new Error('Only operators (the admin token) see this.'));
  return {
    role: 'key',
    listProjects: operatorsOnly,
    createProject: operatorsOnly,
    deleteProject: operatorsOnly,
    getProject: (id) => request('GET', project(id)),
    updatePolicy: (id, { ceilings: _ceilings, priority: _priority, ...policy }) => request('PATCH', `${project(id)}/rate-limits`, policy),
    updateSettings: (id, body) => request('PUT', project(id), body),
    listKeys: (id, cursor) => request('GET', `/v1/api-keys${query({ project_id: id, limit: 100, cursor })}`),
    createKey: (id, body) => request('POST', '/v1/api-keys', { ...body, project_id: id }),
    rotateKey: (_id, keyId, grace) => request('PUT', key(keyId), { grace_period_seconds: grace }),
    revokeKey: (_id, keyId) => request('DELETE', key(keyId)),
    usage: (id, usageQuery) => request('GET', `${project(id)}/usage${query({ ...usageQuery })}`),
    webhookDeliveries: operatorsOnly,
    webhooks: operatorsOnly,
  };
}

export const apiFor = (role: Role): ConsoleApi => (role === 'admin' ? adminApi() : keyApi());

/** Every page of a list (the console shows and searches all of it). */
export async function allPages<T>(load: (cursor?: string) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await load(cursor);
    items.push(...page.data);
    if (!page.has_more || page.next_cursor === null) return items;
    cursor = page.next_cursor;
  }
}
