import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;

/** Two real server processes on one Redis: what one replica does, the other sees. */
describe('API keys across two replicas (real processes, real Redis)', () => {
  let a: GatewayProcess;
  let b: GatewayProcess;
  const secrets: string[] = [];

  const call = async (gateway: GatewayProcess, method: string, path: string, secret: string, body?: unknown) => {
    const response = await fetch(`${gateway.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, text, json: JSON.parse(text) };
  };

  beforeAll(async () => {
    const configYaml = `
models:
  - id: echo-1
    provider: echo
  - id: echo-2
    provider: echo
redis:
  key_prefix: e2e${randomBase62(8)}
auth:
  cache_ttl_ms: 30000
`;
    const env = { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'debug' };
    [a, b] = await Promise.all([GatewayProcess.start({ env, configYaml }), GatewayProcess.start({ env, configYaml })]);
  });

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('bootstrap → create → list → rotate with grace → revoke → expiry, seen by the other replica', async () => {
    const bootstrap = await call(a, 'POST', '/admin/v1/projects', ADMIN_TOKEN, { name: 'e2e' });
    expect(bootstrap.status).toBe(200);
    const projectId: string = bootstrap.json.id;
    const rootSecret: string = bootstrap.json.api_key.secret;
    secrets.push(rootSecret);

    const created = await call(a, 'POST', '/v1/api-keys', rootSecret, { name: 'worker', project_id: projectId });
    expect(created.status).toBe(200);
    const workerId: string = created.json.id;
    const workerSecret: string = created.json.secret;
    secrets.push(workerSecret);

    const listed = await call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, workerSecret);
    expect(listed.status).toBe(200);
    expect(listed.json.data.map((key: { id: string }) => key.id)).toEqual([workerId, bootstrap.json.api_key.id]);
    expect(listed.text).not.toContain(workerSecret);
    expect(listed.text).not.toContain(rootSecret);

    // Rotation on A with a 2 s grace; B has the old secret cached from the list above.
    const rotated = await call(a, 'PUT', `/v1/api-keys/${workerId}`, rootSecret, { grace_period_seconds: 2, reason: 'e2e rotation' });
    expect(rotated.status).toBe(200);
    const rotatedSecret: string = rotated.json.secret;
    secrets.push(rotatedSecret);
    const graceEnds = Date.parse(rotated.json.previous_secret_expires_at);
    expect((await call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, workerSecret)).status).toBe(200);
    expect((await call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, rotatedSecret)).status).toBe(200);
    await sleep(Math.max(0, graceEnds - Date.now()) + 50);
    const afterGrace = await call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, workerSecret);
    expect(afterGrace.status).toBe(401);
    expect(afterGrace.json.error.code).toBe('invalid_api_key');

    // Revocation on A reaches B, which has the key cached, within a second.
    expect((await call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, rotatedSecret)).status).toBe(200);
    const revoked = await call(a, 'DELETE', `/v1/api-keys/${workerId}`, rootSecret);
    expect(revoked.status).toBe(200);
    const revokedAt = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - revokedAt < 1000) {
      status = (await call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, rotatedSecret)).status;
      if (status === 200) await sleep(20);
    }
    expect(status).toBe(401);
    expect(Date.now() - revokedAt).toBeLessThan(1000);

    // A key that expires in 2 s works on B, then answers expired_api_key.
    const expiresAt = new Date(Date.now() + 2000).toISOString();
    const temporary = await call(a, 'POST', '/v1/api-keys', rootSecret, { name: 'temp', project_id: projectId, expires_at: expiresAt });
    expect(temporary.status).toBe(200);
    secrets.push(temporary.json.secret);
    expect((await call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, temporary.json.secret)).status).toBe(200);
    await sleep(Math.max(0, Date.parse(expiresAt) - Date.now()) + 50);
    const expired = await call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, temporary.json.secret);
    expect(expired.status).toBe(401);
    expect(expired.json.error.code).toBe('expired_api_key');
  });

  it('deleting a project on one replica stops its keys on the other within a second, and removes its data', async () => {
    const created = await call(a, 'POST', '/admin/v1/projects', ADMIN_TOKEN, { name: 'doomed' });
    const projectId: string = created.json.id;
    const secret: string = created.json.api_key.secret;
    secrets.push(secret);
    const second = await call(a, 'POST', `/admin/v1/projects/${projectId}/api-keys`, ADMIN_TOKEN, { name: 'second' });
    secrets.push(second.json.secret);
    // Both keys are now in b's cache (30 s TTL): only the invalidation can stop them in time.
    for (const key of [secret, second.json.secret]) expect((await call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, key)).status).toBe(200);
    const stored = await call(b, 'POST', '/v1/chat/completions', secret, { model: 'echo-1', messages: [{ role: 'user', content: 'keep me' }], store: true });
    const conversationId: string = stored.json.conversation_id;

    const read = await call(b, 'GET', `/admin/v1/projects/${projectId}`, ADMIN_TOKEN);
    expect(read.json).toMatchObject({ id: projectId, name: 'doomed', key_count: 2 });
    const listed = await call(b, 'GET', '/admin/v1/projects?limit=100', ADMIN_TOKEN);
    expect(listed.json.data.map((project: { id: string }) => project.id)).toContain(projectId);

    const deleted = await call(a, 'DELETE', `/admin/v1/projects/${projectId}`, ADMIN_TOKEN);
    expect(deleted.json).toMatchObject({ id: projectId, deleted: true });
    const startedMs = Date.now();
    for (const key of [secret, second.json.secret]) {
      let status = 200;
      while (status !== 401 && Date.now() - startedMs < 1000) status = (await call(b, 'GET', `/v1/conversations/${conversationId}`, key)).status;
      expect(status).toBe(401);
    }
    expect(Date.now() - startedMs).toBeLessThan(1000);
    expect((await call(b, 'GET', `/admin/v1/projects/${projectId}`, ADMIN_TOKEN)).status).toBe(404);
    expect((await call(b, 'DELETE', `/admin/v1/projects/${projectId}`, ADMIN_TOKEN)).status).toBe(404);
    const after = await call(b, 'GET', '/admin/v1/projects?limit=100', ADMIN_TOKEN);
    expect(after.json.data.map((project: { id: string }) => project.id)).not.toContain(projectId);
    const audit = await call(b, 'GET', `/admin/v1/projects/${projectId}/audit`, ADMIN_TOKEN);
    expect(audit.json.data[0]).toMatchObject({ action: 'project.delete', actor: 'admin' });
  });

  it('a PATCH on one replica that removes a model or a scope takes effect on the other at once', async () => {
    const project = await call(a, 'POST', '/admin/v1/projects', ADMIN_TOKEN, { name: 'governed' });
    const projectId: string = project.json.id;
    const rootSecret: string = project.json.api_key.secret;
    const created = await call(a, 'POST', '/v1/api-keys', rootSecret, { name: 'agent', project_id: projectId, scopes: ['model', 'keys:read'], models: ['echo-*'] });
    expect(created.status).toBe(200);
    const keyId: string = created.json.id;
    const secret: string = created.json.secret;
    secrets.push(rootSecret, secret);
    const chat = (model: string) => call(b, 'POST', '/v1/chat/completions', secret, { model, messages: [{ role: 'user', content: 'hi' }] });
    /** Polls b until the answer changes from 200; the key is in b's cache (30 s TTL), so only the invalidation can change it in time. */
    const refusedOnB = async (request: () => Promise<{ status: number; json: { error: { code: string; message: string } } }>) => {
      const startedMs = Date.now();
      let answer = await request();
      while (answer.status === 200 && Date.now() - startedMs < 1000) {
        await sleep(20);
        answer = await request();
      }
      expect(Date.now() - startedMs).toBeLessThan(1000);
      return answer;
    };
    expect((await chat('echo-2')).status).toBe(200);
    expect((await call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, secret)).status).toBe(200);

    const narrowed = await call(a, 'PATCH', `/v1/api-keys/${keyId}`, rootSecret, { models: ['echo-1'] });
    expect(narrowed.status).toBe(200);
    const modelRefused = await refusedOnB(() => chat('echo-2'));
    expect(modelRefused.status).toBe(403);
    expect(modelRefused.json.error).toMatchObject({ type: 'permission_error', code: 'model_not_allowed', param: 'model' });
    expect((await chat('echo-1')).status).toBe(200);
    const models = await call(b, 'GET', '/v1/models', secret);
    expect(models.json.data.map((model: { id: string }) => model.id)).toEqual(['echo-1']);

    expect((await call(a, 'PATCH', `/v1/api-keys/${keyId}`, rootSecret, { scopes: ['model'] })).status).toBe(200);
    const scopeRefused = await refusedOnB(() => call(b, 'GET', `/v1/api-keys?project_id=${projectId}`, secret));
    expect(scopeRefused.status).toBe(403);
    expect(scopeRefused.json.error).toMatchObject({ type: 'permission_error', code: 'insufficient_scope' });
    expect(scopeRefused.json.error.message).toContain("'keys:read'");
    expect((await chat('echo-1')).status).toBe(200);
    // Read back on b: the fields as a PATCH on a left them.
    const read = await call(b, 'GET', `/v1/api-keys/${keyId}`, rootSecret);
    expect(read.json).toMatchObject({ id: keyId, scopes: ['model'], models: ['echo-1'] });
  });

  it('never writes a secret or the admin token to a log line', async () => {
    expect(secrets.length).toBeGreaterThanOrEqual(4);
    await Promise.all([a.stop(), b.stop()]);
    const lines = [...a.logs, ...b.logs];
    expect(lines.length).toBeGreaterThan(20);
    expect(lines.some((line) => line.includes('api key rotated'))).toBe(true);
    for (const secret of [...secrets, ADMIN_TOKEN]) {
      const leaks = lines.filter((line) => line.includes(secret) || line.includes(secret.slice(8, 40)));
      expect(leaks).toEqual([]);
    }
  });
});
