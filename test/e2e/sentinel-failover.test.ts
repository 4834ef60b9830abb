import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoConfig, GatewayProcess } from '../support/gateway-process.js';
import { MASTER_GROUP, RedisSentinelGroup } from '../support/redis-sentinel.js';
import { ADMIN_TOKEN, type TestProject } from '../support/test-app.js';

const CONFIG = echoConfig({ commandTimeoutMs: 300, flushIntervalMs: 100 });

interface Outcome {
  status: number;
  ms: number;
  at: number;
}

/**
 * REDIS_MODE=sentinel against a real master, replica and three sentinels on loopback; the
 * master is killed under traffic and the sentinels promote the replica.
 */
describe('gateway process on Redis Sentinel', () => {
  let group: RedisSentinelGroup;
  let gateway: GatewayProcess;
  let project: TestProject;

  beforeAll(async () => {
    group = await RedisSentinelGroup.start();
    gateway = await GatewayProcess.start({
      env: {
        REDIS_URL: group.url,
        REDIS_MODE: 'sentinel',
        REDIS_SENTINEL_MASTER: MASTER_GROUP,
        NOVA_ADMIN_TOKEN: ADMIN_TOKEN,
        LOG_LEVEL: 'info',
      },
      configYaml: CONFIG,
    });
    project = await gateway.createProject({ name: 'sentinel', requests_per_minute: 100_000, burst_limit: 0 });
  }, 90_000);
  afterAll(async () => {
    await gateway?.stop();
    await group?.stop();
  });

  const chat = async (): Promise<Outcome> => {
    const started = Date.now();
    const response = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...project.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }),
    });
    await response.arrayBuffer();
    return { status: response.status, ms: Date.now() - started, at: Date.now() };
  };

  it('serves through the master the sentinels name', async () => {
    expect((await chat()).status).toBe(200);
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200);
    expect(await group.masterPort()).toBe(group.master.port);
  });

  it('follows a failover under traffic: no request hangs or fails other than 503, and writes land on the new master', async () => {
    const oldMaster = group.master.port;
    // The project and its key must have reached the replica before the master dies.
    await group.waitUntil(async () => {
      const { Redis } = await import('ioredis');
      const replica = new Redis({ port: group.replica.port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
      replica.on('error', () => undefined);
      try {
        await replica.connect();
        return (await replica.keys('*')).some((key) => key.includes(project.projectId));
      } finally {
        replica.disconnect();
      }
    }, 10_000);

    const outcomes: Outcome[] = [];
    let running = true;
    const traffic = (async () => {
      while (running && outcomes.length < 5000) {
        outcomes.push(await chat());
        await sleep(20);
      }
    })();
    await sleep(300);
    const killedAt = Date.now();
    await group.killMaster();
    await group.waitUntil(async () => (await group.masterPort()) === group.replica.port, 30_000);
    const back = JSON.parse(await gateway.waitForLog(/is reachable again/, 30_000)) as { msg: string; address: string };
    await sleep(1000);
    running = false;
    await traffic;

    if (process.env.SENTINEL_FIGURES) {
      const count = (status: number) => outcomes.filter((outcome) => outcome.status === status).length;
      console.log({ requests: outcomes.length, ok: count(200), unavailable: count(503), max_ms: Math.max(...outcomes.map((o) => o.ms)), back: back.msg });
    }
    expect(back.address).toBe(`127.0.0.1:${group.replica.port}`);
    expect(back.msg).toContain(`was at 127.0.0.1:${oldMaster}`);
    const down = JSON.parse(await gateway.waitForLog(/is unreachable/)) as { msg: string };
    expect(down.msg).toContain(`master "${MASTER_GROUP}" via sentinels`);

    // Auth from the cache and the per-replica fallback keep most requests served; the rest are 503.
    expect(outcomes.filter((outcome) => outcome.status !== 200 && outcome.status !== 503)).toEqual([]);
    expect(Math.max(...outcomes.map((outcome) => outcome.ms))).toBeLessThan(5000);
    const after = outcomes.filter((outcome) => outcome.at > killedAt + 100);
    expect(after.length).toBeGreaterThan(10);
    expect(after.at(-1)!.status).toBe(200);

    // Writes go to the promoted replica (a stale connection to a read-only node would fail them).
    const created = await fetch(`${gateway.url}/admin/v1/projects/${project.projectId}/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'after failover' }),
    });
    expect(created.status).toBe(200);
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200);
    expect(gateway.logs.filter((line) => line.includes('"level":50'))).toEqual([]);
  });
});
