import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSecret } from '../../src/auth/key-format.js';
import { RedisProcess } from '../support/redis-server.js';
import { buildTestApp, createProject, createTestStore, errorOf, type TestApp, type TestProject } from '../support/test-app.js';

describe('Redis unreachable for key management', () => {
  let redis: RedisProcess;
  let t: TestApp;
  let project: TestProject;
  let clock = Date.now();

  beforeAll(async () => {
    redis = await RedisProcess.start();
    const store = await createTestStore('redis', { url: redis.url });
    t = await buildTestApp('redis', { store, deps: { now: () => clock } });
    project = await createProject(t.app);
    // Warm the key cache, then take Redis away.
    expect((await t.app.inject({ url: `/v1/api-keys?project_id=${project.projectId}`, headers: project.auth })).statusCode).toBe(200);
    redis.freeze();
  });
  afterAll(async () => {
    await t.close();
    await t.store.close();
    await redis.stop();
  });

  it('answers a write 503 store_unavailable quickly, authenticating from the cache', async () => {
    const started = Date.now();
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/api-keys',
      headers: project.auth,
      payload: { name: 'during outage', project_id: project.projectId },
    });
    expect(errorOf(response)).toMatchObject({ status: 503, type: 'service_unavailable', code: 'store_unavailable' });
    // Bounded by the command timeout (2 s in tests), not hanging.
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('keeps authenticating a known key past the cache TTL (stale-if-error), and only a known one', async () => {
    clock += 60_000;
    const response = await t.app.inject({ url: '/v1/models/echo-1', headers: project.auth });
    expect(response.statusCode).toBe(200);
    const stranger = await t.app.inject({ url: '/v1/models/echo-1', headers: { authorization: `Bearer ${generateSecret()}` } });
    expect(errorOf(stranger)).toMatchObject({ status: 503, code: 'store_unavailable' });
  });

  it('fails readiness', async () => {
    expect((await t.app.inject({ url: '/readyz' })).json()).toEqual({ status: 'store_unavailable' });
  });
});
