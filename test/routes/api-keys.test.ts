import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { generateSecret } from '../../src/auth/key-format.js';
import { buildTestApp, createProject, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

describe.each(STORE_KINDS)('API keys (%s store)', (kind) => {
  let t: TestApp;
  let project: TestProject;
  let clock: number;

  beforeEach(async () => {
    // Starts at the real time: Redis expires grace-period secrets by its own clock.
    clock = Date.now();
    t = await buildTestApp(kind, { deps: { now: () => clock } });
    project = await createProject(t.app);
  });
  afterEach(() => t.close());

  const createKey = (body: Record<string, unknown>, auth = project.auth) =>
    t.app.inject({ method: 'POST', url: '/v1/api-keys', headers: auth, payload: body });
  const list = (query: string, auth = project.auth) => t.app.inject({ method: 'GET', url: `/v1/api-keys?${query}`, headers: auth });
  const rotate = (keyId: string, body: Record<string, unknown> = {}, auth = project.auth) =>
    t.app.inject({ method: 'PUT', url: `/v1/api-keys/${keyId}`, headers: auth, payload: body });
  const revoke = (keyId: string, auth = project.auth) => t.app.inject({ method: 'DELETE', url: `/v1/api-keys/${keyId}`, headers: auth });
  const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });

  it('creates a key: envelope, metadata and the secret once', async () => {
    const response = await createKey({ name: 'ci', project_id: project.projectId });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({ object: 'nova.resource', status: 'succeeded', name: 'ci', project_id: project.projectId, expires_at: null, last_used_at: null });
    expect(body.id).toMatch(/^key_[0-9A-Za-z]{16,}$/);
    expect(body.secret).toMatch(/^nova_sk_[0-9A-Za-z]{38}$/);
    expect(body.redacted_value).toBe(`nova_sk_…${body.secret.slice(-4)}`);
    expect((await list(`project_id=${project.projectId}`, bearer(body.secret))).statusCode).toBe(200);
  });

  it('lists metadata only, newest first, paging with an opaque cursor', async () => {
    const created: string[] = [project.keyId];
    for (let i = 0; i < 4; i++) {
      clock += 1000;
      created.push((await createKey({ name: `k${i}`, project_id: project.projectId })).json().id);
    }
    const pages: string[][] = [];
    let cursor: string | null = null;
    do {
      const response = await list(`project_id=${project.projectId}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(response.statusCode).toBe(200);
      expect(response.body).not.toMatch(/nova_sk_[0-9A-Za-z]{38}/);
      const body = response.json();
      expect(body.id).toBe(project.projectId);
      for (const item of body.data) expect(Object.keys(item).sort()).toEqual(['budgets', 'created_at', 'expires_at', 'id', 'last_used_at', 'metadata', 'models', 'name', 'priority', 'project_id', 'rate_limits', 'redacted_value', 'scopes']);
      pages.push(body.data.map((key: { id: string }) => key.id));
      cursor = body.next_cursor;
      expect(body.has_more).toBe(cursor !== null);
    } while (cursor);
    expect(pages.map((page) => page.length)).toEqual([2, 2, 1]);
    expect(pages.flat()).toEqual([...created].reverse());
  });

  it('defaults to 20 keys a page', async () => {
    for (let i = 0; i < 21; i++) await createKey({ name: `k${i}`, project_id: project.projectId });
    const body = (await list(`project_id=${project.projectId}`)).json();
    expect(body.data).toHaveLength(20);
    expect(body.has_more).toBe(true);
  });

  it('refuses an expires_at in the past and expires keys on time', async () => {
    const past = errorOf(await createKey({ name: 'x', project_id: project.projectId, expires_at: new Date(clock - 1000).toISOString() }));
    expect(past).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_parameter', param: 'expires_at' });
    const created = (await createKey({ name: 'temp', project_id: project.projectId, expires_at: new Date(clock + 60_000).toISOString() })).json();
    expect(created.expires_at).toBe(new Date(clock + 60_000).toISOString());
    expect((await list(`project_id=${project.projectId}`, bearer(created.secret))).statusCode).toBe(200);
    clock += 60_000;
    const expired = errorOf(await list(`project_id=${project.projectId}`, bearer(created.secret)));
    expect(expired).toMatchObject({ status: 401, type: 'authentication_error', code: 'expired_api_key' });
  });

  it('rotates: same id, name and project; the old secret works through the grace period, then fails', async () => {
    const response = await rotate(project.keyId, { grace_period_seconds: 30, reason: 'leaked in a log' });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({ id: project.keyId, name: 'default', project_id: project.projectId });
    expect(body.secret).not.toBe(project.secret);
    expect(body.previous_secret_expires_at).toBe(new Date(clock + 30_000).toISOString());
    expect((await list(`project_id=${project.projectId}`)).statusCode).toBe(200);
    expect((await list(`project_id=${project.projectId}`, bearer(body.secret))).statusCode).toBe(200);
    clock += 30_000;
    expect(errorOf(await list(`project_id=${project.projectId}`))).toMatchObject({ status: 401, code: 'invalid_api_key' });
    expect((await list(`project_id=${project.projectId}`, bearer(body.secret))).statusCode).toBe(200);
    const audit = await t.app.inject({
      method: 'GET',
      url: `/admin/v1/projects/${project.projectId}/audit`,
      headers: { authorization: 'Bearer test-admin-token-0123456789' },
    });
    const rotation = audit.json().data.find((event: { action: string }) => event.action === 'api_key.rotate');
    expect(rotation).toMatchObject({ key_id: project.keyId, project_id: project.projectId, reason: 'leaked in a log', actor: 'api_key', client_address: '127.0.0.1' });
    expect(audit.body).not.toContain(project.secret);
    expect(audit.body).not.toContain(body.secret);
  });

  it('rotates with no grace by default: the old secret fails at once', async () => {
    const body = (await rotate(project.keyId)).json();
    expect(body.previous_secret_expires_at).toBeNull();
    expect(errorOf(await list(`project_id=${project.projectId}`))).toMatchObject({ status: 401, code: 'invalid_api_key' });
    expect((await list(`project_id=${project.projectId}`, bearer(body.secret))).statusCode).toBe(200);
  });

  it('revokes: the key fails at once and leaves the list', async () => {
    const other = (await createKey({ name: 'other', project_id: project.projectId })).json();
    const response = await revoke(other.id);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ id: other.id, revoked_at: new Date(clock).toISOString() });
    expect(errorOf(await list(`project_id=${project.projectId}`, bearer(other.secret)))).toMatchObject({ status: 401, code: 'invalid_api_key' });
    const ids = (await list(`project_id=${project.projectId}`)).json().data.map((key: { id: string }) => key.id);
    expect(ids).toEqual([project.keyId]);
    expect(errorOf(await revoke(other.id))).toMatchObject({ status: 404, type: 'not_found_error', code: 'resource_not_found', param: 'api_key_id' });
  });

  it('keeps projects apart: 403 for another project id, 404 for another project key', async () => {
    const stranger = await createProject(t.app, { name: 'stranger' });
    expect(errorOf(await list(`project_id=${stranger.projectId}`))).toMatchObject({ status: 403, type: 'permission_error', code: 'project_mismatch', param: 'project_id' });
    expect(errorOf(await list('project_id=proj_doesnotexist00000000'))).toMatchObject({ status: 403, code: 'project_mismatch' });
    expect(errorOf(await createKey({ name: 'x', project_id: stranger.projectId }))).toMatchObject({ status: 403, code: 'project_mismatch', param: 'project_id' });
    expect(errorOf(await rotate(stranger.keyId))).toMatchObject({ status: 404, code: 'resource_not_found', param: 'api_key_id' });
    expect(errorOf(await revoke(stranger.keyId))).toMatchObject({ status: 404, code: 'resource_not_found' });
    expect((await list(`project_id=${stranger.projectId}`, stranger.auth)).statusCode).toBe(200);
  });

  describe('invalid input', () => {
    /** A create request with a body as written, under a content type. */
    const createRaw = (payload: string, contentType = 'application/json') =>
      t.app.inject({ method: 'POST', url: '/v1/api-keys', headers: { ...project.auth, 'content-type': contentType }, payload });

    it.each([
      ['a missing name', { project_id: 'P' }, 'name'],
      ['an empty name', { name: '', project_id: 'P' }, 'name'],
      ['a name of the wrong type', { name: 5, project_id: 'P' }, 'name'],
      ['a missing project_id', { name: 'x' }, 'project_id'],
      ['an unknown field', { name: 'x', project_id: 'P', permissions: ['all'] }, 'permissions'],
      ['a malformed expires_at', { name: 'x', project_id: 'P', expires_at: 'tomorrow' }, 'expires_at'],
      ['an expires_at without offset', { name: 'x', project_id: 'P', expires_at: '2030-01-01T00:00:00' }, 'expires_at'],
    ])('create refuses %s', async (_name, body, param) => {
      const payload = JSON.parse(JSON.stringify(body).replace('"P"', JSON.stringify(project.projectId)));
      expect(errorOf(await createKey(payload))).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_parameter', param });
    });

    it.each([
      ['grace below 0', { grace_period_seconds: -1 }, 'grace_period_seconds'],
      ['grace above a week', { grace_period_seconds: 604_801 }, 'grace_period_seconds'],
      ['grace as a string', { grace_period_seconds: '60' }, 'grace_period_seconds'],
      ['a fractional grace', { grace_period_seconds: 1.5 }, 'grace_period_seconds'],
      ['a reason that is not text', { reason: 42 }, 'reason'],
      ['an unknown field', { name: 'renamed' }, 'name'],
    ])('rotate refuses %s', async (_name, body, param) => {
      expect(errorOf(await rotate(project.keyId, body))).toMatchObject({ status: 400, code: 'invalid_parameter', param });
      expect((await list(`project_id=${project.projectId}`)).statusCode).toBe(200);
    });

    it.each([
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=ten', 'limit'],
      ['cursor=bm90LWEtY3Vyc29y', 'cursor'],
      ['unknown=1', 'unknown'],
    ])('list refuses %s', async (query, param) => {
      expect(errorOf(await list(`project_id=${project.projectId}&${query}`))).toMatchObject({ status: 400, code: 'invalid_parameter', param });
    });

    it('list requires project_id', async () => {
      expect(errorOf(await list(''))).toMatchObject({ status: 400, code: 'invalid_parameter', param: 'project_id' });
    });

    it('refuses malformed JSON, naming the body', async () => {
      const response = await createRaw('{"name": "x",');
      expect(errorOf(response)).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_parameter', param: 'body' });
    });

    it('refuses a body that is not an object', async () => {
      const response = await createRaw('[1, 2]');
      expect(errorOf(response)).toMatchObject({ status: 400, code: 'invalid_parameter', param: 'body' });
    });

    it('refuses a wrong content type, naming it', async () => {
      const response = await createRaw(JSON.stringify({ name: 'x', project_id: project.projectId }), 'text/plain');
      expect(errorOf(response)).toMatchObject({ status: 400, code: 'invalid_parameter', param: 'content-type' });
    });
  });

  describe('authentication', () => {
    it.each([
      ['no header', {}, 'missing_api_key'],
      ['a non-bearer scheme', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }, 'missing_api_key'],
      ['a malformed key', { authorization: 'Bearer sk-not-ours' }, 'invalid_api_key'],
      ['a well-formed unknown key', { authorization: `Bearer ${generateSecret()}` }, 'invalid_api_key'],
    ])('answers 401 for %s', async (_name, headers, code) => {
      const response = await t.app.inject({ method: 'GET', url: `/v1/api-keys?project_id=${project.projectId}`, headers });
      expect(errorOf(response)).toMatchObject({ status: 401, type: 'authentication_error', code });
      expect(response.body).not.toContain(project.secret);
    });

    it('records last use', async () => {
      await list(`project_id=${project.projectId}`);
      const keys = (await list(`project_id=${project.projectId}`)).json().data;
      expect(keys[0].last_used_at).toBe(new Date(clock).toISOString());
    });
  });
});

describe.each(STORE_KINDS)('failed-attempt throttling (%s store)', (kind) => {
  let t: TestApp;
  afterEach(() => t.close());

  it('slows repeated bad keys from one address but never refuses a valid key', async () => {
    const config = defaultConfig({ auth: { failed_attempts: { max: 3, window_seconds: 60, block_seconds: 30 } } });
    t = await buildTestApp(kind, { config });
    const project = await createProject(t.app);
    const bad = { authorization: `Bearer ${generateSecret()}` };
    const url = `/v1/api-keys?project_id=${project.projectId}`;
    for (let i = 0; i < 3; i++) expect((await t.app.inject({ url, headers: bad })).statusCode).toBe(401);
    const throttled = await t.app.inject({ url, headers: bad });
    expect(errorOf(throttled)).toMatchObject({ status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await t.app.inject({ url, headers: project.auth })).statusCode).toBe(200);
    // Another address is not affected.
    expect((await t.app.inject({ url, headers: bad, remoteAddress: '10.9.8.7' })).statusCode).toBe(401);
  });
});
