import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisProcess } from '../support/redis-server.js';
import { buildTestApp, createProject, createTestStore, errorOf, type TestApp, type TestProject } from '../support/test-app.js';

describe('Redis unreachable for key management', () => {
  let redis: RedisProcess;
  let t: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    redis = await RedisProcess.start();
    const store = await createTestStore('redis', { url: redis.url });
    t = await buildTestApp('redis', { store });
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

  it('fails readiness', async () => {
    expect((await t.app.inject({ url: '/readyz' })).json()).toEqual({ status: 'store_unavailable' });
  });
});
