import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { RedisProcess } from '../support/redis-server.js';
import type { UsageAnswer } from '../support/usage-answer.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const PREFIX = `bud${randomBase62(6)}`;
const COMMAND_TIMEOUT_MS = 300;
const PRICE = { input: 2.5, output: 10 };
const BUDGETS = { daily_tokens: 1_000_000_000, monthly_tokens: 1_000_000_000, monthly_cost: 1_000_000 };

/**
 * Issue 29, item 5 (docs/limits-and-usage.md, "Budgets"): a Redis hung under traffic (SIGSTOP, a
 * few seconds, then SIGCONT). Requests admitted before, during (by the per-replica fallback) and
 * after it; settlements that time out and run when Redis resumes. Once the usage has flushed, the
 * budget counters hold exactly what was served: no request left at its reservation, none free,
 * none counted twice.
 */
describe('budgets after a hung Redis', () => {
  let redis: RedisProcess;
  let upstream: LoopbackUpstream;
  let gateway: GatewayProcess;
  let reader: Redis;
  let projectId: string;
  let auth: { authorization: string };

  beforeAll(async () => {
    redis = await RedisProcess.start();
    // 9 prompt tokens and 5 completion tokens (one a chunk), reported by the upstream on every call.
    upstream = await LoopbackUpstream.start({ slow: { chunks: ['a ', 'b ', 'c ', 'd ', 'e'], promptTokens: 9, latencyMs: 150 } });
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: redis.url, NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'warn' },
      configYaml: `
models:
  - id: chat
    upstream: ${upstream.baseUrl('slow')}
    pricing: { input_per_million: ${PRICE.input}, output_per_million: ${PRICE.output} }
redis:
  key_prefix: ${PREFIX}
  command_timeout_ms: ${COMMAND_TIMEOUT_MS}
rate_limits:
  management_requests_per_minute: 1000000
usage:
  flush_interval_ms: 100
`,
    });
    ({ projectId, auth } = await gateway.createProject({ name: 'budgets', requests_per_minute: 100_000, burst_limit: 0 }));
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
    const patched = await fetch(`${gateway.url}/admin/v1/projects/${projectId}`, { method: 'PATCH', headers: admin, body: JSON.stringify(BUDGETS) });
    expect(patched.status, await patched.text()).toBe(200);
    reader = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  });

  afterAll(async () => {
    reader?.disconnect();
    await gateway?.stop();
    await upstream?.close();
    await redis?.stop();
  });

  const budgetCounters = async () => {
    const [dt, mt, mc] = await reader.hmget(`${PREFIX}:{${projectId}}:rl:budget`, 'dt', 'mt', 'mc');
    return { dt: Number(dt), mt: Number(mt), mc: Number(mc) };
  };
  const usage = async (): Promise<UsageAnswer> => {
    const response = await fetch(`${gateway.url}/v1/projects/${projectId}/usage`, { headers: auth });
    return (await response.json()) as UsageAnswer;
  };
  const buffered = async () => {
    const metrics = await (await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`)).text();
    return Number(/^nova_usage_buffered_records (\d+)/m.exec(metrics)?.[1] ?? -1);
  };

  it('the counters equal the usage served once Redis is back', async () => {
    let served = 0;
    let calls = 0;
    let stopped = false;
    const worker = async () => {
      while (!stopped) {
        const response = await fetch(`${gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          // A reservation far above the use: every settlement moves the counters.
          body: JSON.stringify({ model: 'chat', max_tokens: 200, messages: [{ role: 'user', content: 'hello there' }] }),
          signal: AbortSignal.timeout(10_000),
        });
        const body = (await response.json()) as { usage?: { total_tokens: number } };
        expect(response.status, JSON.stringify(body)).toBe(200);
        served += body.usage!.total_tokens;
        calls++;
      }
    };
    const workers = Array.from({ length: 6 }, worker);
    await sleep(700);
    redis.freeze();
    // Requests during the outage: admitted by the fallback; those in flight when it began settle into it.
    await sleep(3000);
    redis.thaw();
    await sleep(1000);
    stopped = true;
    await Promise.all(workers);
    expect(calls).toBeGreaterThan(30);
    expect(served).toBe(calls * 14);
    const metrics = await (await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/nova_rate_limit_decisions_total\{result="admitted",source="fallback"\} [1-9]/);
    expect(metrics).toMatch(/nova_redis_errors_total\{operation="settlement"\} [1-9]/);

    await expect.poll(buffered, { timeout: 15_000, interval: 100 }).toBe(0);
    await expect.poll(async () => (await usage()).tokens.total, { timeout: 15_000, interval: 200 }).toBe(served);
    const answer = await usage();
    const counters = await budgetCounters();
    expect({ dt: counters.dt, mt: counters.mt }).toEqual({ dt: served, mt: served });
    expect(counters.mc).toBeCloseTo(answer.cost, 9);
    expect(answer.cost).toBeCloseTo((calls * (9 * PRICE.input + 5 * PRICE.output)) / 1e6, 9);
  }, 60_000);
});
