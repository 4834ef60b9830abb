import OpenAI from 'openai';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { RedisCluster } from '../support/redis-cluster.js';
import type { TestProject } from '../support/test-app.js';

const ADMIN_TOKEN = `quota-admin-${randomBase62(24)}`;
const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
const HI = [{ role: 'user', content: 'hi' }];

/**
 * Issue 12's acceptance, on two real gateway processes sharing one Redis: standalone, and the
 * 3-master Cluster (REDIS_MODE=cluster). Upstreams are fake OpenAI servers on 127.0.0.1.
 */
describe.each(['redis', 'cluster'] as const)('quota acceptance: two processes on one %s', (kind) => {
  let cluster: RedisCluster | undefined;
  let upstream: LoopbackUpstream;
  let a: GatewayProcess;
  let b: GatewayProcess;

  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
    upstream = await LoopbackUpstream.start({
      // 2 prompt + 5 completion tokens, answered after 500 ms: no request settles during a burst.
      slow: { latencyMs: 500, promptTokens: 2, chunks: ['a', 'b', 'c', 'd', 'e'] },
      // Streams of 40 chunks, 250 ms apart: held open for 10 s.
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
  key_prefix: qa${randomBase62(8)}
usage:
  flush_interval_ms: 200
ceilings:
  tokens_per_minute: 1000
`;
    const env = {
      REDIS_URL: kind === 'cluster' ? cluster!.url : inject('redisUrl'),
      REDIS_MODE: kind === 'cluster' ? 'cluster' : 'standalone',
      NOVA_ADMIN_TOKEN: ADMIN_TOKEN,
      LOG_LEVEL: 'warn',
    };
    [a, b] = await Promise.all([GatewayProcess.start({ env, configYaml }), GatewayProcess.start({ env, configYaml })]);
  });
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await upstream?.close();
    await cluster?.stop();
  });

  async function projectWith(policy: Record<string, unknown>): Promise<TestProject> {
    const project = await a.createProject({ name: `acceptance-${kind}` });
    const response = await fetch(`${b.url}/admin/v1/projects/${project.projectId}`, { method: 'PATCH', headers: admin, body: JSON.stringify(policy) });
    expect(response.status).toBe(200);
    return project;
  }
  const chat = (gateway: GatewayProcess, project: TestProject, body: Record<string, unknown>, signal?: AbortSignal) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...project.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: HI, ...body }),
      signal,
    });
  /** Opens a stream and reads its first event: the request holds a slot until aborted or done. */
  async function openStream(gateway: GatewayProcess, project: TestProject) {
    const controller = new AbortController();
    const response = await chat(gateway, project, { model: 'trickle-1', stream: true }, controller.signal);
    if (response.status === 200) await response.body!.getReader().read();
    return { status: response.status, response, abort: () => controller.abort() };
  }

  it('3x the token allowance in concurrent requests admits no more tokens than tokens_per_minute', async () => {
    // Each request reserves 17 (its prompt's bytes) + 20 (max_tokens) = 37: the allowance is 10 requests.
    const project = await projectWith({ tokens_per_minute: 370 });
    const responses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => chat(i % 2 ? a : b, project, { model: 'slow-1', max_tokens: 20 }).then(async (r) => ({ status: r.status, body: await r.json() }))),
    );
    const admitted = responses.filter((r) => r.status === 200);
    const refused = responses.filter((r) => r.status === 429);
    expect(admitted.length + refused.length).toBe(30);
    expect(admitted.length * 37).toBeLessThanOrEqual(370);
    expect(admitted).toHaveLength(10);
    expect(refused[0]!.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(refused[0]!.body.error.message).toContain('tokens_per_minute');
    // Real usage (7 a request) is what the window holds once they settled, and what usage shows.
    await expect
      .poll(async () => (await (await fetch(`${a.url}/v1/projects/${project.projectId}/usage`, { headers: project.auth })).json()).tokens?.total, {
        timeout: 5000,
      })
      .toBe(admitted.length * 7);
    const next = await chat(a, project, { model: 'slow-1', max_tokens: 20 });
    expect(next.status).toBe(200);
    expect(Number(next.headers.get('x-ratelimit-remaining-tokens'))).toBe(370 - 10 * 7 - 37);
  });

  it('a concurrency cap of N admits exactly N parallel streams, and a slot freed by an aborted stream is reusable within 2 s', async () => {
    const project = await projectWith({ max_concurrent_requests: 3 });
    const streams = await Promise.all(Array.from({ length: 6 }, (_, i) => openStream(i % 2 ? a : b, project)));
    const open = streams.filter((stream) => stream.status === 200);
    expect(open).toHaveLength(3);
    const refused = streams.find((stream) => stream.status === 429)!;
    expect((await refused.response.json()).error).toMatchObject({ type: 'rate_limit_error', code: 'concurrency_limit_exceeded' });
    open[0]!.abort();
    const abortedAt = Date.now();
    let reopened: Awaited<ReturnType<typeof openStream>> | undefined;
    while (Date.now() - abortedAt < 2000) {
      const attempt = await openStream(b, project);
      if (attempt.status === 200) {
        reopened = attempt;
        break;
      }
      await sleep(100);
    }
    expect(reopened?.status).toBe(200);
    expect(Date.now() - abortedAt).toBeLessThan(2000);
    // Still exactly N: the freed slot is taken again.
    expect((await openStream(a, project)).status).toBe(429);
    for (const stream of [...open, reopened!]) stream.abort();
  });

  it('a monthly token budget stops at its bound with insufficient_quota, and the official openai SDK does not retry it', async () => {
    // Each request reserves 17 (its prompt's bytes) + 5 and really uses 7: requests are admitted while
    // what is used (settled) plus 22 fits 66, so at most 7 (49 used), at least 3 however late the settlements land.
    const project = await projectWith({ monthly_tokens: 66 });
    const usedTokens = async () => (await (await fetch(`${b.url}/v1/projects/${project.projectId}/usage`, { headers: project.auth })).json()).tokens?.total;
    let admitted = 0;
    // A settlement lands after its response (each replica sends its own): once all have, what they gave
    // back may admit more. Filled until a round with every settlement landed admits none.
    for (let before = -1; before !== admitted; ) {
      before = admitted;
      while (admitted < 20 && (await chat(admitted % 2 ? a : b, project, { model: 'budget-1', max_tokens: 5 })).status === 200) admitted++;
      await expect.poll(usedTokens).toBe(admitted * 7);
    }
    expect(admitted).toBeGreaterThanOrEqual(3);
    expect(admitted).toBeLessThanOrEqual(7);
    let attempts = 0;
    const client = new OpenAI({
      apiKey: project.secret,
      baseURL: `${a.url}/v1`,
      maxRetries: 3,
      fetch: (url, init) => {
        attempts++;
        return fetch(url, init);
      },
    });
    const refused = client.chat.completions.create({ model: 'budget-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 });
    await expect(refused).rejects.toMatchObject({ status: 429, code: 'insufficient_quota', type: 'insufficient_quota' });
    expect(attempts).toBe(1);
    const raw = await chat(b, project, { model: 'budget-1', max_tokens: 5 });
    expect(raw.status).toBe(429);
    expect(raw.headers.get('x-should-retry')).toBe('false');
    expect(Number(raw.headers.get('retry-after'))).toBeGreaterThan(0);
    // What was served stays within the budget: the admitted requests' real usage.
    await expect.poll(usedTokens).toBe(admitted * 7);
    expect(admitted * 7).toBeLessThanOrEqual(66);
  });

  it('a project over its model limit still reads usage and PATCHes its policy', async () => {
    const project = await projectWith({ requests_per_minute: 2, burst_limit: 0 });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await chat(i % 2 ? a : b, project, { model: 'budget-1' })).status);
    expect(statuses).toEqual([200, 200, 429]);
    expect((await fetch(`${a.url}/v1/projects/${project.projectId}/usage`, { headers: project.auth })).status).toBe(200);
    const patched = await fetch(`${b.url}/v1/projects/${project.projectId}/rate-limits`, {
      method: 'PATCH',
      headers: { ...project.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ requests_per_minute: 3 }),
    });
    expect(patched.status).toBe(200);
    expect((await chat(a, project, { model: 'budget-1' })).status).toBe(200);
  });

  it('a key cannot exceed its ceiling, while the admin can raise it', async () => {
    const project = await a.createProject({ name: 'ceilings' });
    const patch = (gateway: GatewayProcess, body: Record<string, unknown>) =>
      fetch(`${gateway.url}/v1/projects/${project.projectId}/rate-limits`, {
        method: 'PATCH',
        headers: { ...project.auth, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const over = await patch(a, { tokens_per_minute: 2000 });
    expect(over.status).toBe(400);
    const { error } = await over.json();
    expect(error).toMatchObject({ code: 'invalid_parameter', param: 'tokens_per_minute' });
    expect(error.message).toContain('ceiling of 1000');
    const raised = await fetch(`${b.url}/admin/v1/projects/${project.projectId}`, {
      method: 'PATCH',
      headers: admin,
      body: JSON.stringify({ ceilings: { tokens_per_minute: 5000 } }),
    });
    expect((await raised.json()).ceilings.tokens_per_minute).toBe(5000);
    const within = await patch(b, { tokens_per_minute: 2000 });
    expect(within.status).toBe(200);
    expect((await within.json()).tokens_per_minute).toBe(2000);
  });

  it("a SIGKILLed replica's slots free within 30 s", async () => {
    const project = await projectWith({ max_concurrent_requests: 2 });
    const held = [await openStream(a, project), await openStream(a, project)];
    expect(held.map((stream) => stream.status)).toEqual([200, 200]);
    a.signal('SIGKILL');
    await a.waitForExit();
    const killedAt = Date.now();
    // The dead replica's leases still hold both slots…
    expect((await openStream(b, project)).status).toBe(429);
    let freedAfterMs = -1;
    while (Date.now() - killedAt < 30_000) {
      const attempt = await openStream(b, project);
      if (attempt.status === 200) {
        freedAfterMs = Date.now() - killedAt;
        attempt.abort();
        break;
      }
      await sleep(500);
    }
    // …until their TTL (rate_limits.lease_ttl_seconds, 15 s) runs out without renewal.
    console.info(`${kind}: slots of the SIGKILLed replica freed after ${freedAfterMs} ms`);
    expect(freedAfterMs).toBeGreaterThan(0);
    expect(freedAfterMs).toBeLessThan(30_000);
  });
});
