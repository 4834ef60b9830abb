import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import type { RawGatewayConfig } from '../../src/config/schema.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { hit } from '../support/quota-traffic.js';
import { RedisProcess } from '../support/redis-server.js';
import { ADMIN_TOKEN, buildTestApp, createProject, createTestStore, errorOf, type TestApp, type TestProject } from '../support/test-app.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * While Redis is unreachable (its process stopped), each replica limits tokens and concurrency
 * on its own at rate_limits.fallback_share (0.5 here) of the last policy it saw; budgets fail open
 * or closed by config, and the decision shows in a metric.
 */
describe('quota fallback while Redis is unreachable', () => {
  let redis: RedisProcess;
  let upstream: LoopbackUpstream;
  let t: TestApp;

  beforeEach(async () => {
    redis = await RedisProcess.start();
    upstream = await LoopbackUpstream.start({ slow: { latencyMs: 400 } });
  });
  afterEach(async () => {
    await t?.close();
    await upstream?.close();
    await redis?.stop();
  });

  async function gatewayWith(overrides: Partial<RawGatewayConfig> = {}) {
    const store = await createTestStore('redis', { url: redis.url });
    const config = defaultConfig({
      models: [{ id: 'slow-1', upstream: upstream.baseUrl('slow') }],
      rate_limits: { fallback_share: 0.5, ...overrides.rate_limits },
      ceilings: {},
    });
    t = await buildTestApp('redis', { store, config });
    return t;
  }

  /** A project with the policy, its key cached and its policy seen by admission (one request while Redis is up). */
  async function projectWith(policy: Record<string, unknown>): Promise<TestProject> {
    const project = await createProject(t.app, { name: 'fallback' });
    expect((await t.app.inject({ method: 'PATCH', url: `/admin/v1/projects/${project.projectId}`, headers: admin, payload: policy })).statusCode).toBe(200);
    expect((await slow(project, 1)).statusCode).toBe(200);
    return project;
  }
  const slow = (project: TestProject, maxTokens: number) => hit(t.app, project, { model: 'slow-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens });
  const metric = async (name: string, labels: string) => {
    const text = await t.ctx.metrics.registry.metrics();
    const line = text.split('\n').find((entry) => entry.startsWith(`${name}{${labels}}`));
    return line ? Number(line.split(' ').at(-1)) : 0;
  };

  it('limits tokens and requests in flight at the configured share of the policy', async () => {
    await gatewayWith();
    const tokens = await projectWith({ tokens_per_minute: 100 });
    const slots = await projectWith({ max_concurrent_requests: 4 });
    await redis.stop();
    // 50 tokens on this replica: two reservations of 22 (the prompt's 17 bytes + 5) fit, a third does not.
    const byTokens = await Promise.all([slow(tokens, 5), slow(tokens, 5), slow(tokens, 5)]);
    expect(byTokens.map((response) => response.statusCode).sort()).toEqual([200, 200, 429]);
    const refusedTokens = byTokens.find((response) => response.statusCode === 429)!;
    expect(errorOf(refusedTokens)).toMatchObject({ code: 'rate_limit_exceeded' });
    expect(refusedTokens.headers['x-ratelimit-limit-tokens']).toBe('100');
    // 2 slots on this replica.
    const bySlots = await Promise.all([slow(slots, 1), slow(slots, 1), slow(slots, 1)]);
    expect(bySlots.map((response) => response.statusCode).sort()).toEqual([200, 200, 429]);
    expect(errorOf(bySlots.find((response) => response.statusCode === 429)!)).toMatchObject({ code: 'concurrency_limit_exceeded' });
    // The slots were given back when the responses ended.
    expect((await Promise.all([slow(slots, 1), slow(slots, 1)])).map((response) => response.statusCode)).toEqual([200, 200]);
  });

  it("limits a key's own tokens and requests in flight at the share of its last-seen limits, naming the key level", async () => {
    await gatewayWith();
    const project = await projectWith({ burst_limit: 0 });
    const created = await t.app.inject({
      method: 'POST',
      url: '/v1/api-keys',
      headers: project.auth,
      payload: { name: 'agent', project_id: project.projectId, rate_limits: { tokens_per_minute: 100, max_concurrent_requests: 4 } },
    });
    expect(created.statusCode, created.body).toBe(200);
    const key: TestProject = { ...project, keyId: created.json().id, secret: created.json().secret, auth: { authorization: `Bearer ${created.json().secret}` } };
    expect((await slow(key, 1)).statusCode).toBe(200);
    await redis.stop();
    // 50 tokens on this replica: two reservations of 22 fit, a third does not; the refusal names the key.
    const byTokens = await Promise.all([slow(key, 5), slow(key, 5), slow(key, 5)]);
    expect(byTokens.map((response) => response.statusCode).sort()).toEqual([200, 200, 429]);
    const refused = byTokens.find((response) => response.statusCode === 429)!;
    expect(refused.headers['x-ratelimit-scope']).toBe('key');
    expect(errorOf(refused).message).toContain('this API key');
    // The project's own key is not held back by the key's limits.
    expect((await slow(project, 5)).statusCode).toBe(200);
  });

  it('lets budgets fail open by default, counting the decision', async () => {
    await gatewayWith();
    const project = await projectWith({ daily_tokens: 1000 });
    await redis.stop();
    expect((await slow(project, 1)).statusCode).toBe(200);
    expect(await metric('nova_quota_budget_store_down_decisions_total', 'decision="open"')).toBeGreaterThanOrEqual(1);
  });

  it('refuses budgeted projects with 503 store_unavailable when budgets fail closed, and others still pass', async () => {
    await gatewayWith({ rate_limits: { budgets_when_store_down: 'closed' } });
    const budgeted = await projectWith({ monthly_tokens: 1000 });
    const free = await projectWith({ burst_limit: 0 });
    await redis.stop();
    const refused = errorOf(await slow(budgeted, 1));
    expect(refused).toMatchObject({ status: 503, type: 'service_unavailable', code: 'store_unavailable' });
    expect(refused.message).toContain('budget');
    expect((await slow(free, 1)).statusCode).toBe(200);
    expect(await metric('nova_quota_budget_store_down_decisions_total', 'decision="closed"')).toBeGreaterThanOrEqual(1);
    expect(await metric('nova_rate_limit_refusals_total', `limit="budget",project_id="${budgeted.projectId}"`)).toBe(1);
  });
});
