import { afterEach, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { buildTestApp, createProject, errorOf, ADMIN_TOKEN, STORE_KINDS, type TestApp } from '../support/test-app.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

describe.each(STORE_KINDS)('admin API (%s store)', (kind) => {
  let t: TestApp;
  afterEach(() => t.close());

  it('bootstraps a project with its first key named "default"', async () => {
    t = await buildTestApp(kind);
    const response = await t.app.inject({
      method: 'POST',
      url: '/admin/v1/projects',
      headers: admin,
      payload: { name: 'Search', environment: 'production', requests_per_minute: 120, burst_limit: 30 },
    });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body).toMatchObject({
      object: 'nova.resource',
      status: 'succeeded',
      name: 'Search',
      environment: 'production',
      rate_limits: { requests_per_minute: 120, burst_limit: 30, tokens_per_minute: null, max_concurrent_requests: null },
      api_key: { name: 'default', project_id: body.id, expires_at: null },
    });
    expect(body.id).toMatch(/^proj_[0-9A-Za-z]{16,}$/);
    expect(body.api_key.secret).toMatch(/^nova_sk_/);
    const keys = await t.app.inject({ url: `/v1/api-keys?project_id=${body.id}`, headers: { authorization: `Bearer ${body.api_key.secret}` } });
    expect(keys.json().data.map((key: { id: string }) => key.id)).toEqual([body.api_key.id]);
  });

  it('takes the policy nested as its answer shows it (rate_limits, budgets), or flat; one field with two values is a 400', async () => {
    t = await buildTestApp(kind);
    const create = (payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: admin, payload });
    const nested = await create({ name: 'n', rate_limits: { requests_per_minute: 50, tokens_per_minute: 9000 }, budgets: { daily_tokens: 1000, monthly_tokens: 5000 } });
    expect(nested.statusCode).toBe(200);
    expect(nested.json().rate_limits).toEqual({
      requests_per_minute: 50,
      burst_limit: 100,
      tokens_per_minute: 9000,
      max_concurrent_requests: null,
      daily_tokens: 1000,
      monthly_tokens: 5000,
      monthly_cost: null,
    });
    // The answer's own rate_limits object is a valid create body.
    const again = await create({ name: 'copy', rate_limits: nested.json().rate_limits });
    expect(again.json().rate_limits).toEqual(nested.json().rate_limits);
    const mixed = await create({ name: 'm', burst_limit: 7, rate_limits: { requests_per_minute: 9, burst_limit: 7 } });
    expect(mixed.json().rate_limits).toMatchObject({ requests_per_minute: 9, burst_limit: 7 });
    const before = (await t.app.inject({ url: '/admin/v1/projects', headers: admin })).json().data.length;
    const twice = await create({ name: 'x', daily_tokens: 5, budgets: { daily_tokens: 6 } });
    expect(errorOf(twice)).toMatchObject({ status: 400, param: 'budgets.daily_tokens' });
    const unknown = await create({ name: 'x', budgets: { weekly_tokens: 6 } });
    expect(errorOf(unknown)).toMatchObject({ status: 400 });
    expect(unknown.json().error.message).toContain('weekly_tokens');
    const negative = await create({ name: 'x', rate_limits: { requests_per_minute: -1 } });
    expect(errorOf(negative)).toMatchObject({ status: 400, param: 'rate_limits.requests_per_minute' });
    expect((await t.app.inject({ url: '/admin/v1/projects', headers: admin })).json().data.length).toBe(before);
  });

  it('uses the configured default policy when none is given', async () => {
    t = await buildTestApp(kind);
    const body = (await t.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: admin, payload: { name: 'p' } })).json();
    expect(body.rate_limits).toEqual({
      requests_per_minute: 600,
      burst_limit: 100,
      tokens_per_minute: null,
      max_concurrent_requests: null,
      daily_tokens: null,
      monthly_tokens: null,
      monthly_cost: null,
    });
    expect(body.ceilings).toEqual({
      requests_per_minute: 10_000,
      burst_limit: 10_000,
      tokens_per_minute: 2_000_000,
      max_concurrent_requests: null,
      daily_tokens: null,
      monthly_tokens: null,
      monthly_cost: null,
    });
    expect(body.environment).toBeNull();
  });

  it.each([
    ['no token', {}],
    ['a wrong token', { authorization: 'Bearer not-the-admin-token-at-all' }],
    ['a project key', null],
  ])('refuses %s with 401', async (_name, headers) => {
    t = await buildTestApp(kind);
    const project = await createProject(t.app);
    const response = await t.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: headers ?? project.auth, payload: { name: 'p' } });
    expect(errorOf(response)).toMatchObject({ status: 401, type: 'authentication_error', code: 'invalid_api_key' });
    expect(response.body).not.toContain(ADMIN_TOKEN);
  });

  it.each([
    [{}, 'name'],
    [{ name: '' }, 'name'],
    [{ name: 'p', requests_per_minute: 0 }, 'requests_per_minute'],
    [{ name: 'p', burst_limit: -1 }, 'burst_limit'],
    [{ name: 'p', burst_limit: 1_000_001 }, 'burst_limit'],
    [{ name: 'p', owner: 'me' }, 'owner'],
  ])('refuses %o naming %s', async (payload, param) => {
    t = await buildTestApp(kind);
    expect(errorOf(await t.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: admin, payload }))).toMatchObject({
      status: 400,
      code: 'invalid_parameter',
      param,
    });
  });

  it('creates a recovery key and keeps an audit trail without secrets', async () => {
    t = await buildTestApp(kind);
    const project = await createProject(t.app);
    const response = await t.app.inject({ method: 'POST', url: `/admin/v1/projects/${project.projectId}/api-keys`, headers: admin, payload: { name: 'recovery' } });
    expect(response.json()).toMatchObject({ name: 'recovery', project_id: project.projectId });
    const audit = await t.app.inject({ url: `/admin/v1/projects/${project.projectId}/audit`, headers: admin });
    expect(audit.json().data.map((event: { action: string }) => event.action)).toEqual(['api_key.create', 'api_key.create', 'project.create']);
    expect(audit.body).not.toContain(project.secret);
    expect(audit.body).not.toContain(response.json().secret);
    const missing = await t.app.inject({ method: 'POST', url: '/admin/v1/projects/proj_missing0000000000/api-keys', headers: admin, payload: { name: 'x' } });
    expect(errorOf(missing)).toMatchObject({ status: 404, code: 'resource_not_found', param: 'project_id' });
  });

  it('creates a key with its own limits, budgets, models, scopes and metadata, as /v1/api-keys takes them', async () => {
    t = await buildTestApp(kind, { config: defaultConfig({ models: [{ id: 'echo-1', provider: 'echo' }] }) });
    const project = await createProject(t.app);
    const create = (payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: `/admin/v1/projects/${project.projectId}/api-keys`, headers: admin, payload: { name: 'ana', ...payload } });
    const response = await create({
      models: ['echo-*'],
      scopes: ['model', 'keys:read'],
      metadata: { owner: 'ana' },
      rate_limits: { requests_per_minute: 1, max_concurrent_requests: 2 },
      budgets: { daily_tokens: 5000 },
    });
    expect(response.statusCode, response.body).toBe(200);
    const key = response.json();
    const expected = {
      models: ['echo-*'],
      scopes: ['model', 'keys:read'],
      metadata: { owner: 'ana' },
      rate_limits: { requests_per_minute: 1, burst_limit: null, tokens_per_minute: null, max_concurrent_requests: 2 },
      budgets: { daily_tokens: 5000, monthly_tokens: null, monthly_cost: null },
    };
    expect(key).toMatchObject(expected);
    const read = await t.app.inject({ url: `/v1/api-keys/${key.id}`, headers: project.auth });
    expect(read.json()).toMatchObject({ ...expected, usage: { remaining: { daily_tokens: 5000 } } });

    // Enforced, not only stored: the key's own 1 request a minute refuses its second, at the key level.
    const chat = () =>
      t.app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        headers: { authorization: `Bearer ${key.secret}` },
        payload: { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] },
      });
    expect((await chat()).statusCode).toBe(200);
    const refused = await chat();
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['x-ratelimit-scope']).toBe('key');

    // The same schema and checks as /v1/api-keys: bounds, unknown fields, a cost budget without prices.
    expect(errorOf(await create({ rate_limits: { requests_per_minute: -1 } }))).toMatchObject({ status: 400, param: 'rate_limits.requests_per_minute' });
    expect(errorOf(await create({ budgets: { daily_tokens: 1.5 } }))).toMatchObject({ status: 400, param: 'budgets.daily_tokens' });
    expect(errorOf(await create({ budgets: { monthly_cost: 10 } }))).toMatchObject({ status: 400, param: 'monthly_cost' });
  });

  it('answers 404 on every admin route when NOVA_ADMIN_TOKEN is unset', async () => {
    t = await buildTestApp(kind, { deps: { adminToken: undefined } });
    const response = await t.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: admin, payload: { name: 'p' } });
    expect(errorOf(response)).toMatchObject({ status: 404, type: 'not_found_error', code: 'resource_not_found' });
  });
});
