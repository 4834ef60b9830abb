import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hit } from '../support/quota-traffic.js';
import { ADMIN_TOKEN, buildTestApp, createProject, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

const invalid = { status: 400, type: 'invalid_request_error', code: 'invalid_parameter' };
const mismatch = { status: 403, type: 'permission_error', code: 'project_mismatch', param: 'project_id' };

describe.each(STORE_KINDS)('project settings, rate limits and usage routes (%s)', (kind) => {
  let t: TestApp;
  let project: TestProject;
  let other: TestProject;

  beforeAll(async () => {
    t = await buildTestApp(kind);
    project = await createProject(t.app, { name: 'original', environment: 'staging', requests_per_minute: 1000, burst_limit: 10 });
    other = await createProject(t.app, { name: 'other' });
  });
  afterAll(() => t.close());

  const put = (projectId: string, payload: unknown, headers = project.auth) =>
    t.app.inject({ method: 'PUT', url: `/v1/projects/${projectId}`, headers, payload: payload as object });
  const patch = (projectId: string, payload: unknown, headers = project.auth) =>
    t.app.inject({ method: 'PATCH', url: `/v1/projects/${projectId}/rate-limits`, headers, payload: payload as object });
  const usage = (projectId: string, query = '', headers = project.auth) =>
    t.app.inject({ url: `/v1/projects/${projectId}/usage${query}`, headers });

  describe('PUT /v1/projects/{project_id}', () => {
    it('replaces name and environment; an omitted environment is cleared', async () => {
      const renamed = await put(project.projectId, { name: 'renamed', environment: 'production' });
      expect(renamed.statusCode).toBe(200);
      const body = renamed.json();
      expect(body).toMatchObject({ id: project.projectId, object: 'nova.resource', status: 'succeeded', name: 'renamed', environment: 'production' });
      expect(Object.keys(body).sort()).toEqual(['created_at', 'environment', 'id', 'name', 'object', 'status', 'updated_at']);
      expect(Date.parse(body.updated_at)).toBeGreaterThanOrEqual(Date.parse(body.created_at));
      const cleared = (await put(project.projectId, { name: 'renamed again' })).json();
      expect(cleared).toMatchObject({ name: 'renamed again', environment: null });
      const stored = await t.store.projects.get(project.projectId);
      expect(stored).toMatchObject({ name: 'renamed again', environment: null, rate_limits: { requests_per_minute: 1000, burst_limit: 10 } });
      const audit = await t.app.inject({ url: `/admin/v1/projects/${project.projectId}/audit`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(audit.json().data[0]).toMatchObject({ action: 'project.update', actor: 'api_key', actor_key_id: project.keyId });
    });

    it('refuses another project, existing or not, with the same 403', async () => {
      expect(errorOf(await put(other.projectId, { name: 'x' }))).toMatchObject(mismatch);
      expect(errorOf(await put('proj_doesnotexist000000', { name: 'x' }))).toMatchObject(mismatch);
      expect((await t.store.projects.get(other.projectId))?.name).toBe('other');
    });

    it.each([
      [{}, 'name'],
      [{ name: '' }, 'name'],
      [{ name: 'x'.repeat(257) }, 'name'],
      [{ name: 5 }, 'name'],
      [{ name: 'ok', environment: 5 }, 'environment'],
      [{ name: 'ok', environment: '' }, 'environment'],
      [{ name: 'ok', rate_limits: {} }, 'rate_limits'],
    ])('refuses %j (400, param %s)', async (payload, param) => {
      expect(errorOf(await put(project.projectId, payload))).toMatchObject({ ...invalid, param });
    });

    it('needs a key (401) and answers it without rate-limit headers', async () => {
      const response = await put(project.projectId, { name: 'x' }, {} as TestProject['auth']);
      expect(errorOf(response)).toMatchObject({ status: 401, type: 'authentication_error', code: 'missing_api_key' });
      expect(response.headers['x-ratelimit-limit-requests']).toBeUndefined();
    });
  });

  describe('PATCH /v1/projects/{project_id}/rate-limits', () => {
    it('changes the given fields only', async () => {
      const response = await patch(project.projectId, { burst_limit: 20 });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toMatchObject({ id: project.projectId, object: 'nova.resource', status: 'succeeded', requests_per_minute: 1000, burst_limit: 20 });
      expect((await patch(project.projectId, { requests_per_minute: 2000 })).json()).toMatchObject({ requests_per_minute: 2000, burst_limit: 20 });
      // Requests under one policy, then another: the headers follow each change.
      for (let i = 0; i < 2; i++) {
        const under = await hit(t.app, project);
        expect(under.headers['x-ratelimit-limit-requests']).toBe('2000');
        expect(under.headers['ratelimit-policy']).toBe('"requests";q=2000;w=60, "burst";q=20;w=600');
      }
      expect((await patch(project.projectId, { requests_per_minute: 1000, burst_limit: 0 })).json()).toMatchObject({ requests_per_minute: 1000, burst_limit: 0 });
      // The next request already runs under the new policy.
      const next = await hit(t.app, project);
      expect(next.statusCode).toBe(200);
      expect(next.headers['x-ratelimit-limit-requests']).toBe('1000');
      expect(next.headers['ratelimit-policy']).toBe('"requests";q=1000;w=60, "burst";q=0;w=600');
    });

    it.each([
      [{}, 'body'],
      [{ requests_per_minute: 0 }, 'requests_per_minute'],
      [{ requests_per_minute: 1_000_001 }, 'requests_per_minute'],
      [{ requests_per_minute: 1.5 }, 'requests_per_minute'],
      [{ requests_per_minute: '100' }, 'requests_per_minute'],
      [{ burst_limit: -1 }, 'burst_limit'],
      [{ burst_limit: 1_000_001 }, 'burst_limit'],
      [{ burst_limit: null }, 'burst_limit'],
      [{ burst_limit: 5, window: 60 }, 'window'],
    ])('refuses %j (400, param %s)', async (payload, param) => {
      const response = await patch(project.projectId, payload);
      expect(errorOf(response)).toMatchObject({ ...invalid, param });
      // Errors of an authenticated request carry the rate-limit headers too (a management route: its own limit).
      expect(response.headers['x-ratelimit-limit-requests']).toBe('1200');
      expect(response.headers['ratelimit-policy']).toBe('"management";q=1200;w=60');
    });

    it('refuses another project (403) and keeps its policy', async () => {
      expect(errorOf(await patch(other.projectId, { requests_per_minute: 1 }))).toMatchObject(mismatch);
      expect((await t.store.projects.get(other.projectId))?.rate_limits.requests_per_minute).toBe(600);
    });
  });

  describe('GET /v1/projects/{project_id}/usage', () => {
    it('defaults to the last 24 hours at minute granularity, with every measure', async () => {
      const before = Date.now();
      const response = await usage(project.projectId);
      expect(response.statusCode).toBe(200);
      const body = response.json();
      expect(Object.keys(body).sort()).toEqual(
        ['audio_seconds', 'cost', 'end_time', 'errors', 'granularity', 'id', 'image_generations', 'object', 'refusals', 'requests', 'start_time', 'status', 'storage_bytes', 'tokens'].sort(),
      );
      expect(body.refusals).toEqual({ requests: 0, tokens: 0, concurrency: 0, budget: 0 });
      expect(body.errors).toBe(0);
      expect(body.granularity).toBe('minute');
      // 24 h widened to the edges of the minutes it overlaps.
      expect(Date.parse(body.start_time) % 60_000).toBe(0);
      expect(Date.parse(body.end_time) % 60_000).toBe(0);
      expect(Date.parse(body.end_time) - Date.parse(body.start_time)).toBeGreaterThanOrEqual(24 * 3_600_000);
      expect(Date.parse(body.end_time) - Date.parse(body.start_time)).toBeLessThanOrEqual(24 * 3_600_000 + 60_000);
      expect(Date.parse(body.end_time)).toBeGreaterThanOrEqual(before);
      expect(Object.keys(body.tokens).sort()).toEqual(['cache_write', 'cached_prompt', 'completion', 'prompt', 'reasoning', 'total']);
      for (const count of Object.values(body.tokens)) expect(count).toEqual(expect.any(Number));
    });

    it.each([
      ['?start_time=2026-01-02T00:00:00Z&end_time=2026-01-01T00:00:00Z', 'start_time'],
      ['?start_time=2026-01-01T00:00:00Z&end_time=2026-01-01T00:00:00Z', 'start_time'],
      ['?end_time=1990-01-01T00:00:00Z&start_time=1990-01-01T00:00:00.000Z', 'start_time'],
      ['?start_time=yesterday', 'start_time'],
      ['?start_time=2026-01-01T00:00:00', 'start_time'],
      ['?end_time=2026-13-01T00:00:00Z', 'end_time'],
      ['?bucket_width=5m', 'bucket_width'],
      // Hour retention (400 days) holds 9600 hours: more than 2000 buckets.
      ['?start_time=0001-01-01T00:00:00Z&end_time=9999-12-31T23:59:59Z&bucket_width=1h', 'bucket_width'],
      ['?group_by=project', 'group_by'],
      ['?group_by=', 'group_by'],
      // An old window answers from hour buckets: a minute width is finer than that.
      ['?group_by=model&start_time=2020-01-01T00:00:00Z&end_time=2021-01-01T00:00:00Z&bucket_width=1m', 'bucket_width'],
      ['?group_by=api_key&bucket_width=10m', 'bucket_width'],
      ['?granularity=minute', 'granularity'],
    ])('refuses %s (400, param %s)', async (query, param) => {
      expect(errorOf(await usage(project.projectId, query))).toMatchObject({ ...invalid, param });
    });

    it('refuses a start_time at or after now when end_time defaults to now', async () => {
      const future = new Date(Date.now() + 3_600_000).toISOString();
      expect(errorOf(await usage(project.projectId, `?start_time=${future}`))).toMatchObject({ ...invalid, param: 'start_time' });
    });

    it('refuses another project (403)', async () => {
      expect(errorOf(await usage(other.projectId))).toMatchObject(mismatch);
    });
  });
});
