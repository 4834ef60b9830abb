import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { ADMIN_TOKEN, buildTestApp, createProject, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

/** A key's rate_limits, budgets and priority (DESIGN.md sections 9 and 10): set, read, changed, kept, bounded; on both stores. */
describe.each(STORE_KINDS)('API key limits (%s store)', (kind) => {
  let t: TestApp;
  let project: TestProject;

  beforeEach(async () => {
    t = await buildTestApp(kind, { config: defaultConfig({ models: [{ id: 'echo-1', provider: 'echo' }] }) });
    project = await createProject(t.app);
  });
  afterEach(() => t.close());

  const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });
  const createKey = (body: Record<string, unknown>, auth = project.auth) =>
    t.app.inject({ method: 'POST', url: '/v1/api-keys', headers: auth, payload: { name: 'k', project_id: project.projectId, ...body } });
  const patchKey = (keyId: string, body: Record<string, unknown>, auth = project.auth) =>
    t.app.inject({ method: 'PATCH', url: `/v1/api-keys/${keyId}`, headers: auth, payload: body });
  const getKey = (keyId: string) => t.app.inject({ method: 'GET', url: `/v1/api-keys/${keyId}`, headers: project.auth });

  it('sets them on create, shows them in GET and the list, changes only the fields a PATCH gives, keeps them on rotation', async () => {
    const created = await createKey({ rate_limits: { requests_per_minute: 30, max_concurrent_requests: 2 }, budgets: { daily_tokens: 5000 } });
    expect(created.statusCode, created.body).toBe(200);
    const { id } = created.json();
    expect(created.json()).toMatchObject({
      rate_limits: { requests_per_minute: 30, burst_limit: null, tokens_per_minute: null, max_concurrent_requests: 2 },
      budgets: { daily_tokens: 5000, monthly_tokens: null, monthly_cost: null },
    });
    const patched = await patchKey(id, { rate_limits: { max_concurrent_requests: null, tokens_per_minute: 900 } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().rate_limits).toEqual({ requests_per_minute: 30, burst_limit: null, tokens_per_minute: 900, max_concurrent_requests: null });
    const rotated = await t.app.inject({ method: 'PUT', url: `/v1/api-keys/${id}`, headers: project.auth, payload: {} });
    expect(rotated.json()).toMatchObject({ rate_limits: { requests_per_minute: 30, tokens_per_minute: 900 }, budgets: { daily_tokens: 5000 } });
    const read = (await getKey(id)).json();
    expect(read).toMatchObject({ budgets: { daily_tokens: 5000 }, usage: { used: { daily_tokens: 0, monthly_tokens: null }, remaining: { daily_tokens: 5000, monthly_cost: null } } });
    const list = (await t.app.inject({ method: 'GET', url: `/v1/api-keys?project_id=${project.projectId}`, headers: project.auth })).json();
    expect(list.data.find((k: { id: string }) => k.id === id).rate_limits.requests_per_minute).toBe(30);
  });

  it("shows the tighter level in x-ratelimit-* and anthropic-ratelimit-*, and the key's policies in RateLimit", async () => {
    const created = await createKey({ rate_limits: { requests_per_minute: 3, tokens_per_minute: 5000, max_concurrent_requests: 4 } });
    expect(created.statusCode, created.body).toBe(200);
    const auth = bearer(created.json().secret);
    const call = (url: string, payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
      t.app.inject({ method: 'POST', url, headers: { ...auth, ...headers }, payload });
    const chat = await call('/v1/chat/completions', { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.statusCode, chat.body).toBe(200);
    expect(chat.headers).toMatchObject({ 'x-ratelimit-limit-requests': '3', 'x-ratelimit-remaining-requests': '2', 'x-ratelimit-limit-tokens': '5000', 'x-ratelimit-scope': 'key' });
    expect(chat.headers['ratelimit-policy']).toMatch(/^"requests";q=\d+;w=60, "burst";q=\d+;w=\d+, "key-requests";q=3;w=60, "key-tokens";q=5000;w=60, "key-concurrency";q=4$/);
    expect(chat.headers.ratelimit).toMatch(/"key-requests";r=2;t=\d+, "key-tokens";r=\d+;t=\d+, "key-concurrency";r=3$/);
    // Any /v1 request that sends anthropic-version gets Anthropic's names too.
    const messages = await call('/v1/chat/completions', { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }, { 'anthropic-version': '2023-06-01' });
    expect(messages.statusCode, messages.body).toBe(200);
    expect(messages.headers).toMatchObject({ 'anthropic-ratelimit-requests-limit': '3', 'anthropic-ratelimit-requests-remaining': '1', 'anthropic-ratelimit-tokens-limit': '5000' });
    // The project's own keys still see the project's windows.
    const own = await t.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: project.auth, payload: { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] } });
    expect(own.headers['x-ratelimit-limit-requests']).not.toBe('3');
    expect(own.headers['ratelimit-policy']).not.toContain('key-');
  });

  it('refuses a negative or non-integer limit with 400 naming the parameter, and changes nothing', async () => {
    const { id } = (await createKey({ rate_limits: { requests_per_minute: 30 } })).json();
    for (const body of [{ rate_limits: { requests_per_minute: -1 } }, { rate_limits: { tokens_per_minute: 1.5 } }, { budgets: { daily_tokens: -5 } }, { rate_limits: { bogus: 1 } }]) {
      const refused = await patchKey(id, body);
      expect(refused.statusCode).toBe(400);
      const error = errorOf(refused);
      expect(error.code).toBe('invalid_parameter');
      expect(error.param).toMatch(/^(rate_limits|budgets)/);
      expect((await createKey(body)).statusCode).toBe(400);
    }
    expect((await getKey(id)).json().rate_limits.requests_per_minute).toBe(30);
  });

  it('lets no key give more than it has, nor more than the project ceilings', async () => {
    const capped = await createKey({ scopes: ['model', 'keys:read', 'keys:write'], rate_limits: { requests_per_minute: 10 }, budgets: { daily_tokens: 100 } });
    const { id, secret } = capped.json();
    // Its own limits: it cannot raise them, remove them, or give more to a new key.
    for (const body of [{ rate_limits: { requests_per_minute: 11 } }, { rate_limits: { requests_per_minute: null } }, { budgets: { daily_tokens: 101 } }]) {
      const refused = await patchKey(id, body, bearer(secret));
      expect(refused.statusCode, refused.body).toBe(400);
      expect(errorOf(refused).message).toContain("API key's own");
    }
    // A key it creates gets its limits by default, lower ones when asked.
    const child = await createKey({ rate_limits: { requests_per_minute: 5 } }, bearer(secret));
    expect(child.json()).toMatchObject({ rate_limits: { requests_per_minute: 5 }, budgets: { daily_tokens: 100 } });
    expect((await createKey({ budgets: { daily_tokens: 1000 } }, bearer(secret))).statusCode).toBe(400);
    // The project's ceilings bound every key (config default: requests_per_minute 10,000).
    await t.app.inject({ method: 'PATCH', url: `/admin/v1/projects/${project.projectId}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: { ceilings: { tokens_per_minute: 500 } } });
    const above = await createKey({ rate_limits: { tokens_per_minute: 501 } });
    expect(above.statusCode).toBe(400);
    expect(errorOf(above)).toMatchObject({ param: 'tokens_per_minute' });
    expect(errorOf(above).message).toContain('ceiling of 500');
  });

  describe('priority', () => {
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const list = async () => (await t.app.inject({ method: 'GET', url: `/v1/api-keys?project_id=${project.projectId}`, headers: project.auth })).json();
    const principalOf = (secret: string) => t.ctx.authenticator.authenticate(secret, '127.0.0.1');

    it('set on create, shown in GET, the list and rotation, changed and cleared (null) by PATCH; the principal has it', async () => {
      expect((await getKey(project.keyId)).json().priority).toBeNull();
      const created = await createKey({ priority: 'low' });
      expect(created.statusCode, created.body).toBe(200);
      const { id, secret } = created.json();
      expect(created.json().priority).toBe('low');
      expect((await getKey(id)).json().priority).toBe('low');
      expect((await principalOf(secret)).priority).toBe('low');
      const patched = await patchKey(id, { priority: 'high' });
      expect(patched.statusCode, patched.body).toBe(200);
      expect(patched.json().priority).toBe('high');
      // The PATCH dropped the cached principal: the next request sees the new priority.
      expect((await principalOf(secret)).priority).toBe('high');
      const rotated = await t.app.inject({ method: 'PUT', url: `/v1/api-keys/${id}`, headers: project.auth, payload: {} });
      expect(rotated.json().priority).toBe('high');
      expect((await principalOf(rotated.json().secret)).priority).toBe('high');
      expect((await list()).data.find((k: { id: string }) => k.id === id).priority).toBe('high');
      const cleared = await patchKey(id, { priority: null });
      expect(cleared.json().priority).toBeNull();
      expect((await principalOf(rotated.json().secret)).priority).toBeNull();
    });

    it('a key without project:write gives only normal or low (its own by default), never high or null', async () => {
      const { id, secret } = (await createKey({ scopes: ['model', 'keys:read', 'keys:write'], priority: 'low' })).json();
      for (const priority of ['high', null]) {
        const refused = await patchKey(id, { priority }, bearer(secret));
        expect(errorOf(refused)).toMatchObject({ status: 403, code: 'insufficient_scope', param: 'priority' });
        expect(errorOf(await createKey({ priority }, bearer(secret)))).toMatchObject({ status: 403, param: 'priority' });
      }
      expect((await getKey(id)).json().priority).toBe('low');
      expect((await patchKey(id, { priority: 'normal' }, bearer(secret))).json().priority).toBe('normal');
      // A key it creates gets its priority unless given another it may set.
      expect((await createKey({}, bearer(secret))).json().priority).toBe('normal');
      expect((await createKey({ priority: 'low' }, bearer(secret))).json().priority).toBe('low');
    });

    it('refuses a value outside high|normal|low with 400 naming priority, and changes nothing', async () => {
      const { id } = (await createKey({ priority: 'low' })).json();
      for (const priority of ['urgent', 1, '']) {
        expect(errorOf(await patchKey(id, { priority }))).toMatchObject({ status: 400, code: 'invalid_parameter', param: 'priority' });
        expect(errorOf(await createKey({ priority }))).toMatchObject({ status: 400, param: 'priority' });
        const adminCreate = await t.app.inject({ method: 'POST', url: `/admin/v1/projects/${project.projectId}/api-keys`, headers: admin, payload: { name: 'a', priority } });
        expect(errorOf(adminCreate)).toMatchObject({ status: 400, param: 'priority' });
      }
      expect((await getKey(id)).json().priority).toBe('low');
    });

    it('the admin gives a key any priority; unspecified, it follows its project (null)', async () => {
      const create = (payload: Record<string, unknown>) =>
        t.app.inject({ method: 'POST', url: `/admin/v1/projects/${project.projectId}/api-keys`, headers: admin, payload: { name: 'a', ...payload } });
      const high = await create({ priority: 'high' });
      expect(high.statusCode, high.body).toBe(200);
      expect(high.json().priority).toBe('high');
      expect((await getKey(high.json().id)).json().priority).toBe('high');
      expect((await create({})).json().priority).toBeNull();
    });
  });
});
