import { afterEach, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { ADMIN_TOKEN, buildTestApp, createProject, STORE_KINDS, type TestApp } from '../support/test-app.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/** Signs in and returns the cookie pair to send back, the Set-Cookie line and the session answer. */
async function signIn(t: TestApp, token: string) {
  const response = await t.app.inject({ method: 'POST', url: '/console/session', payload: { token } });
  const setCookie = String(response.headers['set-cookie'] ?? '');
  return { response, setCookie, cookie: setCookie.split(';')[0]!, body: response.json() };
}

describe.each(STORE_KINDS)('console sessions (%s store)', (kind) => {
  let t: TestApp;
  afterEach(async () => t?.close());

  it('exchanges the admin token for a sealed HttpOnly SameSite=Strict cookie that holds no secret', async () => {
    t = await buildTestApp(kind);
    const { response, setCookie, cookie, body } = await signIn(t, ADMIN_TOKEN);
    expect(response.statusCode).toBe(200);
    expect(setCookie).toMatch(/^nova_session=[A-Za-z0-9_-]+; Path=\/; Max-Age=43200; HttpOnly; SameSite=Strict$/);
    expect(setCookie).not.toContain(ADMIN_TOKEN);
    expect(Buffer.from(cookie.split('=')[1]!, 'base64url').toString('latin1')).not.toContain('admin');
    expect(body).toMatchObject({ role: 'admin', project_id: null, scopes: null });
    expect(Date.parse(body.expires_at) - Date.now()).toBeGreaterThan(43_000_000);

    const projects = await t.app.inject({ method: 'GET', url: '/admin/v1/projects', headers: { cookie } });
    expect(projects.statusCode).toBe(200);
    const again = await t.app.inject({ method: 'GET', url: '/console/session', headers: { cookie } });
    expect(again.json().csrf_token).toBe(body.csrf_token);
  });

  it('sets Secure behind TLS (X-Forwarded-Proto from a trusted proxy)', async () => {
    const config = defaultConfig();
    config.server.trust_proxy = true;
    t = await buildTestApp(kind, { config });
    const response = await t.app.inject({ method: 'POST', url: '/console/session', headers: { 'x-forwarded-proto': 'https' }, payload: { token: ADMIN_TOKEN } });
    expect(String(response.headers['set-cookie'])).toMatch(/; Secure$/);
  });

  it('refuses a state-changing call with the cookie but without the CSRF header', async () => {
    t = await buildTestApp(kind);
    const { cookie, body } = await signIn(t, ADMIN_TOKEN);
    const refused = await t.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: { cookie }, payload: { name: 'p' } });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatchObject({ code: 'csrf_token_invalid', param: 'x-csrf-token' });
    const wrong = await t.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: { cookie, 'x-csrf-token': 'x'.repeat(43) }, payload: { name: 'p' } });
    expect(wrong.statusCode).toBe(403);
    const created = await t.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: { cookie, 'x-csrf-token': body.csrf_token }, payload: { name: 'p' } });
    expect(created.statusCode).toBe(200);
    expect((await t.store.projects.list(10, null)).data.map((project) => project.name)).toEqual(['p']);
  });

  it('gives a key session its own project only, on management routes only, and ends it when the key is revoked', async () => {
    t = await buildTestApp(kind);
    const own = await createProject(t.app, { name: 'own' });
    const other = await createProject(t.app, { name: 'other' });
    const { cookie, body } = await signIn(t, own.secret);
    expect(body).toMatchObject({ role: 'key', project_id: own.projectId, api_key_id: own.keyId });
    expect(body.scopes).toContain('keys:write');

    expect((await t.app.inject({ method: 'GET', url: `/v1/projects/${own.projectId}`, headers: { cookie } })).json().name).toBe('own');
    expect((await t.app.inject({ method: 'GET', url: `/v1/projects/${other.projectId}`, headers: { cookie } })).statusCode).toBe(403);
    expect((await t.app.inject({ method: 'GET', url: '/admin/v1/projects', headers: { cookie } })).statusCode).toBe(401);
    const chat = await t.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { cookie, 'x-csrf-token': body.csrf_token }, payload: { model: 'echo', messages: [] } });
    expect(chat.statusCode).toBe(401);

    const created = await t.app.inject({
      method: 'POST',
      url: '/v1/api-keys',
      headers: { cookie, 'x-csrf-token': body.csrf_token },
      payload: { name: 'made in the console', project_id: own.projectId },
    });
    expect(created.statusCode).toBe(200);

    await t.app.inject({ method: 'DELETE', url: `/admin/v1/projects/${own.projectId}/api-keys/${own.keyId}`, headers: admin });
    expect((await t.app.inject({ method: 'GET', url: '/console/session', headers: { cookie } })).statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: `/v1/projects/${own.projectId}`, headers: { cookie } })).statusCode).toBe(401);
  });

  it('answers a wrong token with a message naming it, counted by the failed-attempt throttle', async () => {
    const config = defaultConfig();
    config.auth.failed_attempts = { max: 2, window_seconds: 60, block_seconds: 60 };
    t = await buildTestApp(kind, { config });
    const first = await signIn(t, 'not the admin token at all');
    expect(first.response.statusCode).toBe(401);
    expect(first.body.error).toMatchObject({ param: 'token', message: expect.stringContaining('neither the admin token nor a valid API key') });
    expect(first.setCookie).toBe('');
    expect((await signIn(t, 'nova_sk_' + 'a'.repeat(40))).response.statusCode).toBe(401);
    expect((await signIn(t, 'still wrong token')).response.statusCode).toBe(429);
  });

  it('ends a session at its expiry and after the admin token changes', async () => {
    const config = defaultConfig();
    config.console.session_ttl_seconds = 60;
    let clock = Date.now();
    t = await buildTestApp(kind, { config, deps: { now: () => clock } });
    const { cookie } = await signIn(t, ADMIN_TOKEN);
    clock += 59_000;
    expect((await t.app.inject({ method: 'GET', url: '/console/session', headers: { cookie } })).statusCode).toBe(200);
    clock += 2_000;
    const expired = await t.app.inject({ method: 'GET', url: '/console/session', headers: { cookie } });
    expect(expired.statusCode).toBe(401);
    expect(expired.json().error.code).toBe('session_required');

    const other = await buildTestApp(kind, { store: t.store, deps: { adminToken: 'another-admin-token-0123456789', consoleSecret: ADMIN_TOKEN } });
    try {
      clock = Date.now();
      const fresh = await signIn(t, ADMIN_TOKEN);
      expect((await other.app.inject({ method: 'GET', url: '/admin/v1/projects', headers: { cookie: fresh.cookie } })).statusCode).toBe(401);
    } finally {
      await other.close();
    }
  });

  it('signs out: DELETE clears the cookie', async () => {
    t = await buildTestApp(kind);
    const { cookie, body } = await signIn(t, ADMIN_TOKEN);
    const out = await t.app.inject({ method: 'DELETE', url: '/console/session', headers: { cookie, 'x-csrf-token': body.csrf_token } });
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(/^nova_session=; Path=\/; Max-Age=0;/);
  });
});

describe('the operator twins of the key and usage routes', () => {
  let t: TestApp;
  afterEach(async () => t?.close());

  it('lists, reads, changes, rotates and revokes a key of any project, and reads its usage', async () => {
    t = await buildTestApp('memory');
    const project = await createProject(t.app, { name: 'team' });
    const base = `/admin/v1/projects/${project.projectId}/api-keys`;
    const list = await t.app.inject({ method: 'GET', url: base, headers: admin });
    expect(list.json().data.map((key: { id: string }) => key.id)).toEqual([project.keyId]);
    expect((await t.app.inject({ method: 'GET', url: `${base}/${project.keyId}`, headers: admin })).json().usage.day).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    const patched = await t.app.inject({ method: 'PATCH', url: `${base}/${project.keyId}`, headers: admin, payload: { name: 'renamed', rate_limits: { requests_per_minute: 5 } } });
    expect(patched.json()).toMatchObject({ name: 'renamed', rate_limits: { requests_per_minute: 5 } });
    const rotated = await t.app.inject({ method: 'PUT', url: `${base}/${project.keyId}`, headers: admin, payload: { grace_period_seconds: 0 } });
    expect(rotated.json().secret).toMatch(/^nova_sk_/);
    expect((await t.app.inject({ method: 'GET', url: `/v1/projects/${project.projectId}`, headers: project.auth })).statusCode).toBe(401);
    const usage = await t.app.inject({ method: 'GET', url: `/admin/v1/projects/${project.projectId}/usage?bucket_width=1h`, headers: admin });
    expect(usage.statusCode).toBe(200);
    expect(usage.json()).toMatchObject({ id: project.projectId, requests: 0, bucket_width: '1h' });
    expect((await t.app.inject({ method: 'DELETE', url: `${base}/${project.keyId}`, headers: admin })).json().revoked_at).toBeTruthy();
    expect((await t.app.inject({ method: 'GET', url: `/admin/v1/projects/proj_missing/api-keys`, headers: admin })).statusCode).toBe(404);
  });
});
