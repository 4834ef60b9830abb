import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import type { TestProject } from '../support/test-app.js';

const PREFIX = `soak${randomBase62(8)}`;
const WARM_UP_S = 4;
const MEASURE_S = 20;

/**
 * Redis memory follows what users keep, not the request rate (issue 15): chat traffic with
 * `store: false` on a project allowed 1,000,000 requests a minute, against the real process and a
 * real Redis, bounded to about half a minute.
 */
describe('Redis memory under load (real process, real Redis)', () => {
  let gateway: GatewayProcess;
  let redis: Redis;
  let project: TestProject;

  beforeAll(async () => {
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: `admin-${randomBase62(20)}`, LOG_LEVEL: 'warn' },
      configYaml: `
models:
  - id: echo-1
    provider: echo
redis:
  key_prefix: ${PREFIX}
usage:
  flush_interval_ms: 200
`,
    });
    redis = new Redis(inject('redisUrl'));
    project = await gateway.createProject({ name: 'soak', requests_per_minute: 1_000_000, burst_limit: 0 });
  });
  afterAll(async () => {
    redis?.disconnect();
    await gateway?.stop();
  });

  const keysOfPrefix = async () => {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${PREFIX}:*`, 'COUNT', 1000);
      cursor = next;
      keys.push(...found);
    } while (cursor !== '0');
    return keys;
  };

  const load = (seconds: number) =>
    autocannon({
      url: `${gateway.url}/v1/chat/completions`,
      method: 'POST',
      headers: { ...project.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'hello there' }], store: false }),
      connections: 16,
      duration: seconds,
    });

  it('adds fewer than one key per 1,000 requests after warm-up, and no project key exceeds 64 KB', async () => {
    await load(WARM_UP_S);
    await sleep(600);
    const before = await keysOfPrefix();
    const result = await load(MEASURE_S);
    await sleep(600);
    const after = await keysOfPrefix();
    const served = result['2xx'];
    expect(served).toBeGreaterThan(5_000);
    const added = after.filter((key) => !before.includes(key));
    expect(added.length).toBeLessThan(served / 1000);

    const sizes = await Promise.all(
      after.filter((key) => key.includes(`{${project.projectId}}`)).map(async (key) => [key, Number(await redis.memory('USAGE', key))] as const),
    );
    const largest = sizes.reduce((max, entry) => (entry[1] > max[1] ? entry : max), ['', 0] as readonly [string, number]);
    expect(largest[1], `largest key ${largest[0]}`).toBeLessThan(64 * 1024);
    console.info(`soak: ${served} requests, ${added.length} keys added, largest project key ${largest[0]} ${largest[1]} B`);
  });
});
