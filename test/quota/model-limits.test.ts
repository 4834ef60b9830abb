import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { budgetPeriodsAt } from '../../src/quota/budget-periods.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { hit, manage } from '../support/quota-traffic.js';
import { ADMIN_TOKEN, buildTestApp, createProject, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/** The 429s of each limit through the routes, and a model route settling its real usage. */
describe.each(STORE_KINDS)('model limits through the routes (%s)', (kind) => {
  let t: TestApp;
  let upstream: LoopbackUpstream;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({
      slow: { latencyMs: 400 },
      // Usage no backend could mean: a prompt count that is not a number, one beyond any cap.
      unreadable: { promptTokens: 'n/a' as unknown as number, chunks: ['a', 'b'] },
      huge: { promptTokens: 1e300, chunks: ['a', 'b'] },
    });
    t = await buildTestApp(kind, {
      config: defaultConfig({
        models: [
          { id: 'echo-1', provider: 'echo' },
          { id: 'slow-1', upstream: upstream.baseUrl('slow') },
          { id: 'unreadable-1', upstream: upstream.baseUrl('unreadable') },
          { id: 'huge-1', upstream: upstream.baseUrl('huge') },
        ],
        ceilings: {},
      }),
    });
  });
  afterAll(async () => {
    await t?.close();
    await upstream?.close();
  });

  async function projectWith(policy: Record<string, unknown>): Promise<TestProject> {
    const project = await createProject(t.app, { name: 'limits' });
    const response = await t.app.inject({ method: 'PATCH', url: `/admin/v1/projects/${project.projectId}`, headers: admin, payload: policy });
    expect(response.statusCode).toBe(200);
    return project;
  }

  it('shows the token rate and the concurrency cap in the headers, and meters tokens reserved vs settled', async () => {
    const project = await projectWith({ tokens_per_minute: 1000, max_concurrent_requests: 3 });
    const response = await hit(t.app, project, { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });
    expect(response.statusCode).toBe(200);
    expect(response.headers['x-ratelimit-limit-tokens']).toBe('1000');
    // 17 (the prompt's bytes of keys and strings) + 10 reserved at admission, as the headers show it.
    expect(response.headers['x-ratelimit-remaining-tokens']).toBe('973');
    expect(response.headers['x-ratelimit-reset-tokens']).toMatch(/^(\d+ms|\d+(\.\d+)?s|\d+m\d+(\.\d+)?s)$/);
    expect(response.headers['ratelimit-policy']).toBe('"requests";q=600;w=60, "burst";q=100;w=600, "tokens";q=1000;w=60, "concurrency";q=3');
    expect(response.headers.ratelimit).toMatch(/^"requests";r=599;t=\d+, "burst";r=100;t=0, "tokens";r=973;t=\d+, "concurrency";r=2$/);
    const metrics = async () => {
      const text = await t.ctx.metrics.registry.metrics();
      const value = (name: string) => Number(text.split('\n').find((line) => line.startsWith(`${name}{project_id="${project.projectId}"}`))?.split(' ').at(-1) ?? NaN);
      return { reserved: value('nova_quota_tokens_reserved_total'), settled: value('nova_quota_tokens_settled_total'), inFlight: value('nova_quota_requests_in_flight') };
    };
    await expect.poll(metrics).toEqual({ reserved: 27, settled: 2, inFlight: 0 });
    // Without a token rate or a cap: no token headers, no extra IETF entries.
    const plain = await hit(t.app, await projectWith({ burst_limit: 5 }));
    expect(plain.headers['x-ratelimit-limit-tokens']).toBeUndefined();
    expect(plain.headers['ratelimit-policy']).toBe('"requests";q=600;w=60, "burst";q=5;w=600');
  });

  it('answers a spent budget with 429 insufficient_quota, x-should-retry: false and Retry-After to the end of the period', async () => {
    const project = await projectWith({ monthly_tokens: 0 });
    const response = await hit(t.app, project);
    const error = errorOf(response);
    expect(error).toMatchObject({ status: 429, type: 'insufficient_quota', code: 'insufficient_quota' });
    expect(error.message).toContain('monthly_tokens');
    expect(response.headers['x-should-retry']).toBe('false');
    const untilMonthEnd = (budgetPeriodsAt(Date.now()).monthEndMs - Date.now()) / 1000;
    expect(Math.abs(Number(response.headers['retry-after']) - untilMonthEnd)).toBeLessThanOrEqual(2);
    // Management traffic is not held by the model budget.
    expect((await manage(t.app, project)).statusCode).toBe(200);
  });

  it('names the token rate when a request cannot fit it, and charges the real usage once the request ends', async () => {
    const project = await projectWith({ tokens_per_minute: 100 });
    const chat = (maxTokens: number) => hit(t.app, project, { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens });
    const tooLarge = errorOf(await chat(101));
    expect(tooLarge).toMatchObject({ status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(tooLarge.message).toContain('tokens_per_minute');
    // Reserved: 17 (prompt bytes) + 80; settled: the echo's 2 tokens (one word in, one out).
    expect((await chat(80)).statusCode).toBe(200);
    const admission = t.ctx.admission;
    await expect
      .poll(async () => {
        const decision = await t.store.quota.admit(project.projectId, admission.settings, { id: `probe${Math.random()}`, tokens: 0, rateTokens: 0, cost: 0, day: '2000-01-01', month: '2000-01' });
        return decision.tokensRemaining;
      })
      .toBe(98);
    // 98 left: 17 + 82 does not fit, 17 + 81 does.
    const refused = errorOf(await chat(82));
    expect(refused.message).toContain('Token rate limit exceeded');
    expect((await chat(81)).statusCode).toBe(200);
  });

  it('reserves the stored history a chat continues, by its stored bytes', async () => {
    const project = await projectWith({ tokens_per_minute: 1_000_000 });
    const long = 'word '.repeat(4000);
    const first = await hit(t.app, project, { model: 'echo-1', messages: [{ role: 'user', content: long }], max_tokens: 10, store: true });
    expect(first.statusCode).toBe(200);
    const conversationId = first.json().conversation_id as string;
    await expect.poll(async () => (await t.store.conversations.get(project.projectId, conversationId))?.bytes ?? 0).toBeGreaterThan(40_000);
    const held = (await t.store.conversations.get(project.projectId, conversationId))!.bytes;
    // The first request settled at its real usage before the next is admitted.
    const used = (first.json() as { usage: { total_tokens: number } }).usage.total_tokens;
    const probe = { id: `probe${Math.random()}`, tokens: 0, rateTokens: 0, cost: 0, day: '2000-01-01', month: '2000-01' };
    await expect.poll(async () => (await t.store.quota.admit(project.projectId, t.ctx.admission.settings, { ...probe, id: `probe${Math.random()}` })).tokensRemaining).toBe(1_000_000 - used);
    const next = await hit(t.app, project, { model: 'echo-1', conversation_id: conversationId, messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });
    expect(next.statusCode).toBe(200);
    // Its own 27 (17 prompt bytes + 10) and the history's stored bytes.
    expect(Number(next.headers['x-ratelimit-remaining-tokens'])).toBe(1_000_000 - used - 27 - held);
  });

  it('charges the whole reservation for usage an upstream reports that is not a whole number in range, and counts it', async () => {
    for (const model of ['unreadable-1', 'huge-1']) {
      const project = await projectWith({ tokens_per_minute: 1000, daily_tokens: 100_000, max_concurrent_requests: 1 });
      const odd = await hit(t.app, project, { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });
      expect(odd.statusCode, `${model} ${odd.body}`).toBe(200);
      // Settled as its reservation, 17 + 10: the next request sees 1000 - 27 - its own 27 reserved.
      const next = await hit(t.app, project, { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });
      expect(next.statusCode, model).toBe(200);
      expect(next.headers['x-ratelimit-remaining-tokens'], model).toBe('946');
      const counted = await t.ctx.metrics.registry.getSingleMetricAsString('nova_charged_as_reserved_total');
      expect(counted).toContain(`nova_charged_as_reserved_total{gen_ai_request_model="${model}",reason="usage_invalid"} 1`);
    }
  });

  it('caps requests in flight: a concurrent one beyond max_concurrent_requests is 429 concurrency_limit_exceeded, and the slot frees when the response ends', async () => {
    const project = await projectWith({ max_concurrent_requests: 1 });
    const slow = () => hit(t.app, project, { model: 'slow-1', messages: [{ role: 'user', content: 'hi' }] });
    const [first, second] = await Promise.all([slow(), slow()]);
    const statuses = [first.statusCode, second.statusCode].sort();
    expect(statuses).toEqual([200, 429]);
    const refused = first.statusCode === 429 ? first : second;
    expect(errorOf(refused)).toMatchObject({ status: 429, type: 'rate_limit_error', code: 'concurrency_limit_exceeded' });
    expect(errorOf(refused).message).toContain('max_concurrent_requests 1');
    expect(refused.headers['retry-after']).toBe('1');
    expect((await slow()).statusCode).toBe(200);
    // A request refused before the handler (unknown model: 404) gives its slot back too.
    expect((await hit(t.app, project, { model: 'nope', messages: [] })).statusCode).toBe(404);
    expect((await slow()).statusCode).toBe(200);
  });
});
