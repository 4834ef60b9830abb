import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { ADMIN_TOKEN, buildTestApp, createProject, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const invalid = { status: 400, type: 'invalid_request_error', code: 'invalid_parameter' };

/** Policy fields (issue 12 item 1) and ceilings (item 2): PATCH by a key, any value by the admin. */
describe.each(STORE_KINDS)('quota policy and ceilings (%s)', (kind) => {
  let t: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    t = await buildTestApp(kind, {
      config: defaultConfig({
        models: [{ id: 'echo-1', provider: 'echo', pricing: { input_per_million: 1, output_per_million: 2 } }],
        defaults: { rate_limits: { requests_per_minute: 100, burst_limit: 0, tokens_per_minute: 5000 }, budgets: { monthly_tokens: 1_000_000 } },
        ceilings: { requests_per_minute: 200, tokens_per_minute: 10_000, max_concurrent_requests: 8 },
      }),
    });
    project = (await createProject(t.app, { name: 'p' })) as TestProject;
  });
  afterAll(() => t.close());

  const patch = (payload: unknown, headers = project.auth) =>
    t.app.inject({ method: 'PATCH', url: `/v1/projects/${project.projectId}/rate-limits`, headers, payload: payload as object });
  const adminPatch = (payload: unknown) =>
    t.app.inject({ method: 'PATCH', url: `/admin/v1/projects/${project.projectId}`, headers: admin, payload: payload as object });
  const adminGet = () => t.app.inject({ url: `/admin/v1/projects/${project.projectId}`, headers: admin });

  it('gives new projects the configured defaults and shows every field with the ceilings', async () => {
    const view = (await adminGet()).json();
    expect(view.rate_limits).toEqual({
      requests_per_minute: 100,
      burst_limit: 0,
      tokens_per_minute: 5000,
      max_concurrent_requests: null,
      daily_tokens: null,
      monthly_tokens: 1_000_000,
      monthly_cost: null,
    });
    expect(view.ceilings).toEqual({
      requests_per_minute: 200,
      burst_limit: null,
      tokens_per_minute: 10_000,
      max_concurrent_requests: 8,
      daily_tokens: null,
      monthly_tokens: null,
      monthly_cost: null,
    });
  });

  it('lets a key set every field up to its ceilings and answers the whole policy', async () => {
    const response = await patch({ tokens_per_minute: 10_000, max_concurrent_requests: 8, daily_tokens: 50_000, monthly_cost: 12.5 });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({
      id: project.projectId,
      object: 'nova.resource',
      status: 'succeeded',
      requests_per_minute: 100,
      burst_limit: 0,
      tokens_per_minute: 10_000,
      max_concurrent_requests: 8,
      daily_tokens: 50_000,
      monthly_tokens: 1_000_000,
      monthly_cost: 12.5,
      ceilings: { requests_per_minute: 200, tokens_per_minute: 10_000, max_concurrent_requests: 8 },
    });
    // null clears an optional limit that has no ceiling.
    expect((await patch({ daily_tokens: null, monthly_cost: null })).json()).toMatchObject({ daily_tokens: null, monthly_cost: null });
    expect((await adminGet()).json().rate_limits).toMatchObject({ tokens_per_minute: 10_000, daily_tokens: null, monthly_cost: null });
  });

  it.each([
    [{ requests_per_minute: 201 }, 'requests_per_minute', '200'],
    [{ tokens_per_minute: 10_001 }, 'tokens_per_minute', '10000'],
    [{ tokens_per_minute: null }, 'tokens_per_minute', '10000'],
    [{ max_concurrent_requests: null }, 'max_concurrent_requests', '8'],
    [{ burst_limit: 5, max_concurrent_requests: 9 }, 'max_concurrent_requests', '8'],
  ])('refuses %j above a ceiling (400 naming %s and the ceiling %s) and changes nothing', async (payload, param, ceiling) => {
    const before = (await adminGet()).json().rate_limits;
    const error = errorOf(await patch(payload));
    expect(error).toMatchObject({ ...invalid, param });
    expect(error.message).toContain(param);
    expect(error.message).toContain(`ceiling of ${ceiling}`);
    expect((await adminGet()).json().rate_limits).toEqual(before);
  });

  it.each([
    [{ tokens_per_minute: -1 }, 'tokens_per_minute'],
    [{ tokens_per_minute: 0 }, 'tokens_per_minute'],
    [{ tokens_per_minute: 1.5 }, 'tokens_per_minute'],
    [{ max_concurrent_requests: 2.5 }, 'max_concurrent_requests'],
    [{ max_concurrent_requests: 0 }, 'max_concurrent_requests'],
    [{ daily_tokens: -5 }, 'daily_tokens'],
    [{ monthly_tokens: 10.5 }, 'monthly_tokens'],
    [{ monthly_tokens: '100' }, 'monthly_tokens'],
    [{ monthly_cost: -0.01 }, 'monthly_cost'],
    [{ monthly_cost: 'lots' }, 'monthly_cost'],
  ])('refuses %j (400 naming %s)', async (payload, param) => {
    expect(errorOf(await patch(payload))).toMatchObject({ ...invalid, param });
    expect(errorOf(await adminPatch(payload))).toMatchObject({ ...invalid, param });
  });

  it('lets the admin set anything, including ceilings, after which the key may go up to the new ceiling', async () => {
    const raised = await adminPatch({ tokens_per_minute: 50_000, ceilings: { tokens_per_minute: 60_000, max_concurrent_requests: null } });
    expect(raised.statusCode).toBe(200);
    expect(raised.json()).toMatchObject({
      rate_limits: { tokens_per_minute: 50_000 },
      ceilings: { tokens_per_minute: 60_000, max_concurrent_requests: null, requests_per_minute: 200 },
    });
    expect((await patch({ tokens_per_minute: 60_000, max_concurrent_requests: null })).statusCode).toBe(200);
    expect(errorOf(await patch({ tokens_per_minute: 60_001 }))).toMatchObject({ ...invalid, param: 'tokens_per_minute' });
    // The admin's own values are not held to any ceiling.
    expect((await adminPatch({ requests_per_minute: 1_000_000 })).json().rate_limits.requests_per_minute).toBe(1_000_000);
    const audit = (await t.app.inject({ url: `/admin/v1/projects/${project.projectId}/audit`, headers: admin })).json();
    expect(audit.data.map((event: { action: string }) => event.action)).toContain('project.ceilings.update');
    expect(errorOf(await t.app.inject({ url: '/admin/v1/projects/proj_missing0000000000', headers: admin }))).toMatchObject({
      status: 404,
      param: 'project_id',
    });
  });
});

describe('monthly_cost without any priced model', () => {
  it('is refused (400 naming monthly_cost) for a key and for the admin; null is fine', async () => {
    const t = await buildTestApp('memory');
    try {
      const project = await createProject(t.app, { name: 'p' });
      const patch = await t.app.inject({
        method: 'PATCH',
        url: `/v1/projects/${project.projectId}/rate-limits`,
        headers: project.auth,
        payload: { monthly_cost: 10 },
      });
      const error = errorOf(patch);
      expect(error).toMatchObject({ ...invalid, param: 'monthly_cost' });
      expect(error.message).toContain('pricing');
      const created = await t.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: admin, payload: { name: 'q', monthly_cost: 5 } });
      expect(errorOf(created)).toMatchObject({ ...invalid, param: 'monthly_cost' });
      const cleared = await t.app.inject({
        method: 'PATCH',
        url: `/v1/projects/${project.projectId}/rate-limits`,
        headers: project.auth,
        payload: { monthly_cost: null },
      });
      expect(cleared.statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });
});
