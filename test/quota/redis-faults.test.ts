import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/connect.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { ECHO_CHAT } from '../support/quota-traffic.js';
import { RedisProcess } from '../support/redis-server.js';
import { ADMIN_TOKEN, buildTestApp, createProject, type TestApp, type TestProject } from '../support/test-app.js';

const COMMAND_TIMEOUT_MS = 300;
const REQUEST_DEADLINE_MS = 4000;

const CONFIG = `
models:
  - id: echo-1
    provider: echo
redis:
  command_timeout_ms: ${COMMAND_TIMEOUT_MS}
rate_limits:
  management_requests_per_minute: 1000000
usage:
  flush_interval_ms: 100
`;

interface Outcome {
  model: boolean;
  status: number;
  admitted: boolean;
  ms: number;
}

/**
 * Redis trouble under traffic, against the real server process (replica A). Replica B
 * (in-process, same Redis) only reads usage: its own meter never flushes during the test,
 * so the usage it reports is exactly what A wrote.
 */
describe('Redis trouble under traffic', () => {
  let redis: RedisProcess;
  let gateway: GatewayProcess;
  let reader: TestApp;
  let project: TestProject;

  beforeEach(async () => {
    unexpected.length = 0;
    redis = await RedisProcess.start();
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: redis.url, REDIS_MODE: 'standalone', NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'warn' },
      configYaml: CONFIG,
    });
    const client = createRedisClient({ url: redis.url, mode: 'standalone', commandTimeoutMs: 2000 });
    client.on('error', () => undefined);
    await waitUntilReady(client, 5000);
    reader = await buildTestApp('redis', {
      store: new RedisStore(client, 'nova'),
      config: defaultConfig({ usage: { flush_interval_ms: 600_000 }, rate_limits: { management_requests_per_minute: 1_000_000 } }),
    });
    project = await createProject(reader.app, { name: 'faults', requests_per_minute: 100_000, burst_limit: 0 });
  });
  afterEach(async () => {
    await gateway?.stop();
    await reader?.close();
    await reader?.store.close();
    await redis?.stop();
  });

  const unexpected: string[] = [];

  async function traffic(durationMs: number, workers: number, during: () => Promise<void>): Promise<Outcome[]> {
    const outcomes: Outcome[] = [];
    const end = Date.now() + durationMs;
    const worker = async () => {
      // Model requests (admission by the model policy, no store read after it) alternate with
      // management reads (their own limit, then a store read that is 503 while Redis is away).
      for (let i = 0; Date.now() < end; i++) {
        const started = Date.now();
        try {
          const signal = AbortSignal.timeout(REQUEST_DEADLINE_MS);
          const response =
            i % 2 === 0
              ? await fetch(`${gateway.url}/v1/chat/completions`, {
                  method: 'POST',
                  headers: { ...project.auth, 'content-type': 'application/json' },
                  body: JSON.stringify(ECHO_CHAT),
                  signal,
                })
              : await fetch(`${gateway.url}/v1/api-keys?project_id=${project.projectId}&limit=1`, { headers: project.auth, signal });
          const text = await response.text();
          if (response.status !== 200 && response.status !== 503) unexpected.push(`${response.status} ${text}`);
          const admitted = response.status !== 429 && response.headers.has('x-ratelimit-limit-requests');
          outcomes.push({ model: i % 2 === 0, status: response.status, admitted, ms: Date.now() - started });
        } catch (error) {
          outcomes.push({ model: i % 2 === 0, status: -1, admitted: false, ms: Date.now() - started });
          throw error;
        }
      }
    };
    await Promise.all([...Array.from({ length: workers }, worker), during()]);
    return outcomes;
  }

  async function usageRequests(): Promise<number> {
    const response = await reader.app.inject({ url: `/v1/projects/${project.projectId}/usage`, headers: project.auth });
    return response.statusCode === 200 ? (response.json().requests as number) : -1;
  }

  async function expectRecovered(outcomes: Outcome[]) {
    const statuses = new Set(outcomes.map((outcome) => outcome.status));
    if (unexpected.length) console.error(gateway.logs.filter((line) => line.includes('"level":50')).slice(0, 3).join('\n'));
    expect(unexpected.slice(0, 3)).toEqual([]);
    // Served throughout: admitted (200 from Redis, 503 store_unavailable while it was away).
    expect([...statuses].filter((status) => status !== 200 && status !== 503)).toEqual([]);
    expect(statuses.has(503)).toBe(true);
    // No request hung: each answered within a few command timeouts.
    expect(Math.max(...outcomes.map((outcome) => outcome.ms))).toBeLessThan(REQUEST_DEADLINE_MS);
    // The process stayed up.
    expect(gateway.child.exitCode).toBeNull();
    expect((await fetch(`${gateway.url}/livez`)).status).toBe(200);
    await gateway.waitUntilReady(15_000);
    // Every admitted request, counted once, once the buffer has drained.
    const admitted = outcomes.filter((outcome) => outcome.admitted).length;
    expect(admitted).toBe(outcomes.length);
    await expect.poll(usageRequests, { timeout: 15_000, interval: 250 }).toBe(admitted);
    await sleep(500);
    expect(await usageRequests()).toBe(admitted);
    const metrics = await (await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/nova_redis_errors_total\{operation="admission"\} [1-9]/);
    expect(metrics).toMatch(/nova_rate_limit_decisions_total\{result="admitted",source="fallback"\} [1-9]/);
    expect(metrics).toMatch(/nova_usage_flush_failures_total [1-9]/);
    expect(metrics).toMatch(/nova_usage_buffered_records 0\b/);
    // Each admitted request is one record, and each model request one more (what it consumed),
    // written once and never dropped.
    const records = admitted + outcomes.filter((outcome) => outcome.admitted && outcome.model).length;
    expect(metrics).toMatch(new RegExp(`nova_usage_flushed_records_total ${records}\\b`));
    expect(metrics).toMatch(/nova_usage_dropped_records_total 0\b/);
    return admitted;
  }

  it('a hung Redis (SIGSTOP, then SIGCONT): fails fast, falls back, then writes every buffered request', async () => {
    const outcomes = await traffic(4000, 4, async () => {
      await sleep(1000);
      redis.freeze();
      await sleep(1500);
      redis.thaw();
    });
    const admitted = await expectRecovered(outcomes);
    expect(admitted).toBeGreaterThan(20);
  });

  it('a Redis that goes down and comes back (SHUTDOWN SAVE, restart from the dump)', async () => {
    const outcomes = await traffic(5000, 4, async () => {
      await sleep(1000);
      await redis.shutdownWithSave();
      await sleep(1500);
      await redis.spawn();
    });
    const admitted = await expectRecovered(outcomes);
    expect(admitted).toBeGreaterThan(20);
  });
});
