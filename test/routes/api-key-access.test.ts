import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { SCOPES } from '../../src/auth/key-access.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { ADMIN_TOKEN, buildTestApp, createProject, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

/** Key fields, scopes and model allow-lists (DESIGN.md section 9), on both stores. */
describe.each(STORE_KINDS)('API key access (%s store)', (kind) => {
  let upstream: LoopbackUpstream;
  let t: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start();
  });
  afterAll(() => upstream.close());
  beforeEach(async () => {
    const config = defaultConfig({
      models: [
        { id: 'm', upstream: upstream.baseUrl(), endpoints: ['chat', 'messages'], aliases: ['claude-*'] },
        { id: 'other', upstream: upstream.baseUrl(), endpoints: ['chat', 'messages'] },
      ],
    });
    t = await buildTestApp(kind, { config });
    project = await createProject(t.app);
  });
  afterEach(() => t.close());

  const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });
  const createKey = (body: Record<string, unknown>, auth = project.auth) =>
    t.app.inject({ method: 'POST', url: '/v1/api-keys', headers: auth, payload: { name: 'k', project_id: project.projectId, ...body } });
  const getKey = (keyId: string, auth = project.auth) => t.app.inject({ method: 'GET', url: `/v1/api-keys/${keyId}`, headers: auth });
  const patchKey = (keyId: string, body: Record<string, unknown>, auth = project.auth) =>
    t.app.inject({ method: 'PATCH', url: `/v1/api-keys/${keyId}`, headers: auth, payload: body });
  const chat = (auth: Record<string, string>, model = 'm') =>
    t.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: auth, payload: { model, messages: [{ role: 'user', content: 'hi' }] } });
  const newKey = async (body: Record<string, unknown>, auth = project.auth) => {
    const response = await createKey(body, auth);
    expect(response.statusCode, response.body).toBe(200);
    const created = response.json() as { id: string; secret: string };
    return { id: created.id, auth: bearer(created.secret), body: response.json() };
  };
  const stored = async (keyId: string) => {
    const { id: _id, object: _object, status: _status, last_used_at: _used, ...fields } = (await getKey(keyId)).json();
    return fields;
  };

  it("the project's first key has every scope; a new key takes its creator's by default", async () => {
    const first = (await getKey(project.keyId)).json();
    expect(first).toMatchObject({ id: project.keyId, scopes: [...SCOPES], models: null, metadata: {} });
    const plain = await newKey({});
    expect(plain.body).toMatchObject({ scopes: [...SCOPES], models: null, metadata: {} });
    const reader = await newKey({ scopes: ['keys:read', 'keys:write'], models: ['m'] });
    const child = await newKey({}, reader.auth);
    expect(child.body).toMatchObject({ scopes: ['keys:read', 'keys:write'], models: ['m'] });
  });

  it('create sets the fields; GET, list items and rotation show and keep them', async () => {
    const fields = { models: ['m', 'gpt-*'], scopes: ['model', 'usage:read'], metadata: { owner: 'ana', team: 'search' } };
    const key = await newKey(fields);
    expect(key.body).toMatchObject(fields);
    expect((await getKey(key.id)).json()).toMatchObject({ id: key.id, object: 'nova.resource', ...fields });
    const list = (await t.app.inject({ method: 'GET', url: `/v1/api-keys?project_id=${project.projectId}`, headers: project.auth })).json();
    expect(list.data.find((item: { id: string }) => item.id === key.id)).toMatchObject(fields);
    const rotated = await t.app.inject({ method: 'PUT', url: `/v1/api-keys/${key.id}`, headers: project.auth, payload: {} });
    expect(rotated.json()).toMatchObject(fields);
    expect((await getKey(key.id)).json()).toMatchObject(fields);
    expect((await chat(bearer(rotated.json().secret))).statusCode).toBe(200);
  });

  it('PATCH changes the given fields and the next request of the key sees them', async () => {
    const key = await newKey({ scopes: ['model', 'keys:read'], metadata: { owner: 'ana' } });
    expect((await chat(key.auth)).statusCode).toBe(200);
    const patched = await patchKey(key.id, { scopes: ['keys:read'], models: ['other'], metadata: { owner: 'bo' }, name: 'renamed' });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ id: key.id, object: 'nova.resource', name: 'renamed', scopes: ['keys:read'], models: ['other'], metadata: { owner: 'bo' } });
    expect(errorOf(await chat(key.auth))).toMatchObject({ status: 403, type: 'permission_error', code: 'insufficient_scope' });
    expect((await patchKey(key.id, { scopes: ['model'], models: null })).statusCode).toBe(200);
    expect((await chat(key.auth)).statusCode).toBe(200);
    expect((await chat(key.auth, 'other')).statusCode).toBe(200);
    const audit = await t.app.inject({ method: 'GET', url: `/admin/v1/projects/${project.projectId}/audit`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(audit.json().data.filter((event: { action: string }) => event.action === 'api_key.update')).toHaveLength(2);
    expect(errorOf(await patchKey('key_doesnotexist0000000000', { name: 'x' }))).toMatchObject({ status: 404, code: 'resource_not_found', param: 'api_key_id' });
  });

  it('every route outside its scopes is refused with 403 insufficient_scope naming the scope, before admission', async () => {
    const none = await newKey({ scopes: [] });
    const modelOnly = await newKey({ scopes: ['model'] });
    const conversationId = 'conv_0123456789abcdefABCD';
    const cases: [string, string, string, Record<string, unknown> | undefined, Record<string, string>][] = [
      ['model', 'POST', '/v1/chat/completions', { model: 'm', messages: [] }, none.auth],
      ['model', 'POST', '/v1/messages', { model: 'm', max_tokens: 5, messages: [] }, none.auth],
      ['keys:read', 'GET', `/v1/api-keys?project_id=${project.projectId}`, undefined, modelOnly.auth],
      ['keys:read', 'GET', `/v1/api-keys/${project.keyId}`, undefined, modelOnly.auth],
      ['keys:write', 'POST', '/v1/api-keys', { name: 'x', project_id: project.projectId }, modelOnly.auth],
      ['keys:write', 'PATCH', `/v1/api-keys/${project.keyId}`, { name: 'x' }, modelOnly.auth],
      ['keys:write', 'PUT', `/v1/api-keys/${project.keyId}`, {}, modelOnly.auth],
      ['keys:write', 'DELETE', `/v1/api-keys/${project.keyId}`, undefined, modelOnly.auth],
      ['project:write', 'PUT', `/v1/projects/${project.projectId}`, { name: 'x' }, modelOnly.auth],
      ['project:write', 'PATCH', `/v1/projects/${project.projectId}/rate-limits`, { requests_per_minute: 1 }, modelOnly.auth],
      ['usage:read', 'GET', `/v1/projects/${project.projectId}/usage`, undefined, modelOnly.auth],
      ['conversations:read', 'GET', `/v1/conversations/${conversationId}`, undefined, modelOnly.auth],
    ];
    const before = upstream.requests.length;
    for (const [scope, method, url, payload, auth] of cases) {
      const response = await t.app.inject({ method: method as 'GET', url, headers: auth, ...(payload ? { payload } : {}) });
      const name = `${method} ${url}`;
      expect(response.statusCode, `${name}: ${response.body}`).toBe(403);
      if (url === '/v1/messages') {
        expect(response.json(), name).toMatchObject({ type: 'error', error: { type: 'permission_error' } });
        expect(response.json().error.message).toContain(`'${scope}'`);
      } else {
        expect(errorOf(response), name).toMatchObject({ type: 'permission_error', code: 'insufficient_scope' });
        expect(errorOf(response).message, name).toContain(`'${scope}'`);
      }
      // Refused before admission: nothing counted, no rate-limit headers.
      expect(response.headers['x-ratelimit-limit-requests'], name).toBeUndefined();
    }
    expect(upstream.requests.length).toBe(before);
    expect((await getKey(project.keyId)).json().name).toBe('default');
    // GET /v1/models is open to every key of the project.
    expect((await t.app.inject({ method: 'GET', url: '/v1/models', headers: none.auth })).statusCode).toBe(200);
  });

  it('a model outside the allow-list: 403 model_not_allowed before admission, left out of the model lists, 404 by id', async () => {
    const key = await newKey({ models: ['m'] });
    const before = upstream.requests.length;
    const refused = await chat(key.auth, 'other');
    expect(errorOf(refused)).toMatchObject({ status: 403, type: 'permission_error', code: 'model_not_allowed', param: 'model' });
    expect(refused.headers['x-ratelimit-limit-requests']).toBeUndefined();
    const messages = await t.app.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: { ...key.auth, 'anthropic-version': '2023-06-01' },
      payload: { model: 'other', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(messages.statusCode).toBe(403);
    expect(messages.json()).toMatchObject({ type: 'error', error: { type: 'permission_error' } });
    expect(upstream.requests.length).toBe(before);
    const usage = (await t.app.inject({ method: 'GET', url: `/v1/projects/${project.projectId}/usage`, headers: project.auth })).json();
    expect(usage.requests ?? 0).toBe(0);

    const openAi = (await t.app.inject({ method: 'GET', url: '/v1/models', headers: key.auth })).json();
    expect(openAi.data.map((model: { id: string }) => model.id)).toEqual(['m']);
    const anthropic = (await t.app.inject({ method: 'GET', url: '/v1/models', headers: { ...key.auth, 'anthropic-version': '2023-06-01' } })).json();
    expect(anthropic.data.map((model: { id: string }) => model.id)).toEqual(['m']);
    expect(errorOf(await t.app.inject({ method: 'GET', url: '/v1/models/other', headers: key.auth }))).toMatchObject({ status: 404, code: 'model_not_found' });
    expect((await t.app.inject({ method: 'GET', url: '/v1/models/m', headers: key.auth })).statusCode).toBe(200);
    const all = (await t.app.inject({ method: 'GET', url: '/v1/models', headers: project.auth })).json();
    expect(all.data.map((model: { id: string }) => model.id)).toEqual(['m', 'other']);
    expect((await chat(key.auth, 'm')).statusCode).toBe(200);
  });

  it('aliases: a configured id allows its aliases; an alias pattern allows the names it matches, not the id', async () => {
    const byId = await newKey({ models: ['m'] });
    expect((await chat(byId.auth, 'claude-opus-4-8')).statusCode).toBe(200);
    const byAlias = await newKey({ models: ['claude-*'] });
    expect((await chat(byAlias.auth, 'claude-opus-4-8')).statusCode).toBe(200);
    expect(errorOf(await chat(byAlias.auth, 'm'))).toMatchObject({ status: 403, code: 'model_not_allowed' });
    expect(errorOf(await chat(byAlias.auth, 'other'))).toMatchObject({ status: 403, code: 'model_not_allowed' });
    const glob = await newKey({ models: ['o*'] });
    expect((await chat(glob.auth, 'other')).statusCode).toBe(200);
    expect(errorOf(await chat(glob.auth, 'claude-opus-4-8'))).toMatchObject({ status: 403, code: 'model_not_allowed' });
  });

  it('refuses escalation: no scope or model beyond the caller, for itself or another key', async () => {
    const manager = await newKey({ scopes: ['keys:read', 'keys:write'], models: ['m'] });
    const other = await newKey({ scopes: ['keys:read'] });
    const cases: [Promise<{ statusCode: number; json(): unknown }>, string, string][] = [
      [createKey({ scopes: ['keys:read', 'model'] }, manager.auth), 'insufficient_scope', 'scopes'],
      [patchKey(manager.id, { scopes: ['keys:read', 'keys:write', 'project:write'] }, manager.auth), 'insufficient_scope', 'scopes'],
      [patchKey(other.id, { scopes: ['usage:read'] }, manager.auth), 'insufficient_scope', 'scopes'],
      [createKey({ models: ['other'] }, manager.auth), 'model_not_allowed', 'models'],
      [createKey({ models: ['*'] }, manager.auth), 'model_not_allowed', 'models'],
      [patchKey(manager.id, { models: null }, manager.auth), 'model_not_allowed', 'models'],
    ];
    for (const [pending, code, param] of cases) expect(errorOf(await pending)).toMatchObject({ status: 403, type: 'permission_error', code, param });
    const refused = errorOf(await createKey({ scopes: ['model'] }, manager.auth));
    expect(refused.message).toContain("'model'");
    expect(await stored(manager.id)).toMatchObject({ scopes: ['keys:read', 'keys:write'], models: ['m'] });
    expect(await stored(other.id)).toMatchObject({ scopes: ['keys:read'], models: null });
    // Within its own: allowed, and it may drop scopes of its own.
    expect((await createKey({ scopes: ['keys:read'], models: ['m'] }, manager.auth)).statusCode).toBe(200);
    expect((await patchKey(manager.id, { scopes: ['keys:write'] }, manager.auth)).statusCode).toBe(200);
  });

  describe('bad input: a 400 naming the parameter, and nothing changes', () => {
    it.each([
      ['an unknown scope', { scopes: ['admin'] }, 'scopes[0]'],
      ['scopes not a list', { scopes: 'model' }, 'scopes'],
      ['metadata not a map', { metadata: ['a'] }, 'metadata'],
      ['a metadata value not a string', { metadata: { owner: 5 } }, 'metadata.owner'],
      ['too many metadata entries', { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata'],
      ['a metadata value too long', { metadata: { owner: 'x'.repeat(257) } }, 'metadata.owner'],
      ['a metadata key too long', { metadata: { ['k'.repeat(65)]: 'v' } }, 'metadata.' + 'k'.repeat(65)],
      ['a model pattern not a string', { models: [5] }, 'models[0]'],
      ['an empty model pattern', { models: [''] }, 'models[0]'],
      ['an unknown field', { budget: 5 }, 'budget'],
    ])('%s', async (_name, body, param) => {
      const key = await newKey({ scopes: ['model'], models: ['m'], metadata: { owner: 'ana' } });
      const before = await stored(key.id);
      const expected = { status: 400, type: 'invalid_request_error', code: 'invalid_parameter', param };
      expect(errorOf(await patchKey(key.id, { name: 'changed', ...body }))).toMatchObject(expected);
      expect(errorOf(await createKey(body))).toMatchObject(expected);
      expect(await stored(key.id)).toEqual(before);
      const keys = (await t.app.inject({ method: 'GET', url: `/v1/api-keys?project_id=${project.projectId}`, headers: project.auth })).json();
      expect(keys.data).toHaveLength(2);
    });

    it('a PATCH with no field', async () => {
      const before = await stored(project.keyId);
      expect(errorOf(await patchKey(project.keyId, {}))).toMatchObject({ status: 400, code: 'invalid_parameter', param: 'body' });
      expect(await stored(project.keyId)).toEqual(before);
    });
  });

  it('a key stored before these fields existed keeps every scope and model', async () => {
    // What an older gateway stored: no scopes, models or metadata in the record.
    const legacy = await newKey({ scopes: ['keys:read'], models: ['m'] });
    if (t.store.kind === 'redis') {
      const internals = t.store as unknown as { redis: { hdel(key: string, ...fields: string[]): Promise<number> }; keys: { apiKey(p: string, k: string): string } };
      expect(await internals.redis.hdel(internals.keys.apiKey(project.projectId, legacy.id), 'scopes', 'models', 'metadata')).toBe(3);
    } else {
      await t.store.apiKeys.update(project.projectId, legacy.id, { scopes: null, models: null }, { action: 'api_key.update', project_id: project.projectId, key_id: legacy.id, at: new Date().toISOString(), actor: 'admin', actor_key_id: null, client_address: '127.0.0.1', request_id: 'r', reason: null });
    }
    // The key is in this replica's cache with its old fields: forget it, as a restart would.
    t.ctx.authenticator['options'].cache.clear();
    expect(await stored(legacy.id)).toMatchObject({ scopes: [...SCOPES], models: null });
    expect((await chat(legacy.auth, 'other')).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: `/v1/projects/${project.projectId}/usage`, headers: legacy.auth })).statusCode).toBe(200);
  });
});
