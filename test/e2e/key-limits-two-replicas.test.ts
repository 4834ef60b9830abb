import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import type { TestProject } from '../support/test-app.js';

const ADMIN_TOKEN = `keylimits-admin-${randomBase62(24)}`;
const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
const HI = [{ role: 'user', content: 'hi' }];

/**
 * Issue 32's "two levels, one admission" on two real gateway processes sharing one Redis: a key's own
 * limits are exact across replicas (requests, tokens, concurrency, a budget), and both levels together
 * admit only what each allows. Upstreams are fake OpenAI servers on 127.0.0.1.
 */
describe('key limits: two processes on one Redis', () => {
  let upstream: LoopbackUpstream;
  let a: GatewayProcess;
  let b: GatewayProcess;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({
      slow: { latencyMs: 500, promptTokens: 2, chunks: ['a', 'b', 'c', 'd', 'e'] },
      trickle: { chunks: Array.from({ length: 40 }, (_, i) => `w${i} `), chunkDelayMs: 250 },
      budget: { promptTokens: 2, chunks: ['a', 'b', 'c', 'd', 'e'] },
    });
    const configYaml = `
models:
  - id: slow-1
    upstream: ${upstream.baseUrl('slow')}
  - id: trickle-1
    upstream: ${upstream.baseUrl('trickle')}
    timeout_ms: 60000
  - id: budget-1
    upstream: ${upstream.baseUrl('budget')}
redis:
  key_prefix: kl${randomBase62(8)}
usage:
  flush_interval_ms: 200
ceilings:
  tokens_per_minute: 1000
`;
    const env = { REDIS_URL: inject('redisUrl'), REDIS_MODE: 'standalone', NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'warn' };
    [a, b] = await Promise.all([GatewayProcess.start({ env, configYaml }), GatewayProcess.start({ env, configYaml })]);
  });
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await upstream?.close();
  });

  async function projectWith(policy: Record<string, unknown>): Promise<TestProject> {
    const project = await a.createProject({ name: 'key-limits' });
    const response = await fetch(`${b.url}/admin/v1/projects/${project.projectId}`, { method: 'PATCH', headers: admin, body: JSON.stringify(policy) });
    expect(response.status).toBe(200);
    return project;
  }
  /** A key of the project with the given limits, created on one replica: its secret and id. */
  async function keyWith(project: TestProject, limits: Record<string, unknown>): Promise<TestProject> {
    const response = await fetch(`${b.url}/v1/api-keys`, {
      method: 'POST',
      headers: { ...project.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'agent', project_id: project.projectId, ...limits }),
    });
    const body = await response.json();
    expect(response.status, JSON.stringify(body)).toBe(200);
    return { projectId: project.projectId, keyId: body.id, secret: body.secret, auth: { authorization: `Bearer ${body.secret}` } };
  }
  const chat = (gateway: GatewayProcess, key: TestProject, body: Record<string, unknown>, signal?: AbortSignal) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...key.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: HI, ...body }),
      signal,
    });
  const answer = async (r: Response) => ({ status: r.status, scope: r.headers.get('x-ratelimit-scope'), headers: r.headers, body: await r.json() });
  async function openStream(gateway: GatewayProcess, key: TestProject) {
    const controller = new AbortController();
    const response = await chat(gateway, key, { model: 'trickle-1', stream: true }, controller.signal);
    if (response.status === 200) await response.body!.getReader().read();
    return { status: response.status, response, abort: () => controller.abort() };
  }

  it("a key's requests_per_minute admits exactly that many over both replicas; the project is charged only those", async () => {
    const project = await projectWith({ requests_per_minute: 100, burst_limit: 0 });
    const key = await keyWith(project, { rate_limits: { requests_per_minute: 4 } });
    const responses = await Promise.all(Array.from({ length: 12 }, (_, i) => chat(i % 2 ? a : b, key, { model: 'slow-1', max_tokens: 5 }).then(answer)));
    expect(responses.filter((r) => r.status === 200)).toHaveLength(4);
    const refused = responses.filter((r) => r.status === 429);
    expect(refused).toHaveLength(8);
    for (const r of refused) {
      expect(r.scope).toBe('key');
      expect(r.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
      expect(r.body.error.message).toContain(`this API key (${key.keyId})`);
      expect(r.headers.get('x-ratelimit-limit-requests')).toBe('4');
    }
    // The project's window holds the 4 admitted, not the 8 refused.
    const root = await chat(a, project, { model: 'slow-1', max_tokens: 5 });
    expect(root.status).toBe(200);
    expect(root.headers.get('x-ratelimit-remaining-requests')).toBe(String(100 - 5));
  });

  it("a key's tokens_per_minute and max_concurrent_requests hold exactly across replicas", async () => {
    const project = await projectWith({ requests_per_minute: 1000, burst_limit: 0 });
    // Each request reserves 17 (its prompt's bytes) + 20 (max_tokens) = 37: the key's allowance is 10 requests.
    const tokens = await keyWith(project, { rate_limits: { tokens_per_minute: 370 } });
    const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => chat(i % 2 ? a : b, tokens, { model: 'slow-1', max_tokens: 20 }).then(answer)));
    expect(responses.filter((r) => r.status === 200)).toHaveLength(10);
    const refused = responses.find((r) => r.status === 429)!;
    expect(refused.scope).toBe('key');
    expect(refused.body.error.message).toContain('tokens_per_minute 370');

    const slots = await keyWith(project, { rate_limits: { max_concurrent_requests: 2 } });
    const streams = await Promise.all(Array.from({ length: 6 }, (_, i) => openStream(i % 2 ? a : b, slots)));
    const open = streams.filter((s) => s.status === 200);
    expect(open).toHaveLength(2);
    const busy = streams.find((s) => s.status === 429)!;
    expect(busy.response.headers.get('x-ratelimit-scope')).toBe('key');
    expect((await busy.response.json()).error).toMatchObject({ code: 'concurrency_limit_exceeded' });
    // Another key of the project is not held back by this key's slots.
    expect((await chat(b, project, { model: 'slow-1', max_tokens: 5 })).status).toBe(200);
    open[0]!.abort();
    let reopened = 0;
    for (let i = 0; i < 30 && reopened !== 200; i++) {
      const attempt = await openStream(i % 2 ? a : b, slots);
      reopened = attempt.status;
      if (attempt.status === 200) open.push(attempt);
      else await sleep(100);
    }
    expect(reopened).toBe(200);
    for (const s of open) s.abort();
  });

  it("a key's daily budget stops it with insufficient_quota, and GET shows what it used and what is left", async () => {
    const project = await projectWith({ requests_per_minute: 1000, burst_limit: 0 });
    // Each request reserves 17 + 5 and really uses 7.
    const key = await keyWith(project, { budgets: { daily_tokens: 66 } });
    let admitted = 0;
    for (let i = 0; i < 20; i++) {
      const r = await answer(await chat(i % 2 ? a : b, key, { model: 'budget-1', max_tokens: 5 }));
      if (r.status === 200) admitted++;
      else {
        expect(r.status).toBe(429);
        expect(r.scope).toBe('key');
        expect(r.body.error).toMatchObject({ type: 'insufficient_quota' });
        expect(r.body.error.message).toContain("this API key's");
        break;
      }
      // its settlement lands before the next request is admitted
      await sleep(100);
    }
    // Admitted while used + 22 <= 66: 7 a request, so exactly 7 (49 used).
    expect(admitted).toBe(7);
    const view = await (await fetch(`${a.url}/v1/api-keys/${key.keyId}`, { headers: project.auth })).json();
    expect(view.budgets).toMatchObject({ daily_tokens: 66, monthly_tokens: null });
    expect(view.usage.used.daily_tokens).toBe(49);
    expect(view.usage.remaining.daily_tokens).toBe(17);
    // The project's other keys still work.
    expect((await chat(b, project, { model: 'budget-1', max_tokens: 5 })).status).toBe(200);
  });

  it('both levels together: the project admits its limit over two keys, each key at most its own', async () => {
    const project = await projectWith({ requests_per_minute: 5, burst_limit: 0 });
    const one = await keyWith(project, { rate_limits: { requests_per_minute: 3 } });
    const two = await keyWith(project, { rate_limits: { requests_per_minute: 3 } });
    const responses = await Promise.all(
      Array.from({ length: 16 }, (_, i) => chat(i % 2 ? a : b, i % 4 < 2 ? one : two, { model: 'slow-1', max_tokens: 5 }).then(answer)),
    );
    const admitted = responses.filter((r) => r.status === 200);
    expect(admitted).toHaveLength(5);
    const byKey = (i: number) => responses.filter((r, j) => r.status === 200 && (j % 4 < 2 ? 0 : 1) === i).length;
    expect(byKey(0)).toBeLessThanOrEqual(3);
    expect(byKey(1)).toBeLessThanOrEqual(3);
    const scopes = new Set(responses.filter((r) => r.status === 429).map((r) => r.scope));
    expect([...scopes].every((s) => s === 'key' || s === 'project')).toBe(true);
    expect(scopes.has('project')).toBe(true);
  });
});
