import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayProcess } from '../support/gateway-process.js';
import { ECHO_CHAT } from '../support/quota-traffic.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { ADMIN_TOKEN } from '../support/test-app.js';

/** The real process on a 3-master Cluster (REDIS_MODE=cluster, REDIS_URL = seed list). */
describe('gateway process on Redis Cluster', () => {
  let cluster: RedisCluster;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    cluster = await RedisCluster.start();
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: cluster.url, REDIS_MODE: 'cluster', NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'warn' },
      configYaml: 'models:\n  - id: echo-1\n    provider: echo\nrate_limits:\n  window_seconds: 2\nusage:\n  flush_interval_ms: 200\n',
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    await cluster?.stop();
  });

  it('limits, meters and reports usage with every key of a project in one slot', async () => {
    const { projectId, auth } = await gateway.createProject({ name: 'cluster', requests_per_minute: 6, burst_limit: 2 });
    const statuses = await Promise.all(
      Array.from({ length: 12 }, () => fetch(`${gateway.url}/v1/chat/completions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(ECHO_CHAT) }).then((r) => r.status)),
    );
    expect(statuses.filter((status) => status === 200)).toHaveLength(8);
    expect(statuses.filter((status) => status === 429)).toHaveLength(4);
    // The 2 s window frees up; the usage read is admitted and shows the 8 admitted requests
    // (the read's own admission is counted too once flushed: at most one more).
    await sleep(2500);
    const response = await fetch(`${gateway.url}/v1/projects/${projectId}/usage`, { headers: auth });
    expect(response.status).toBe(200);
    const usage = await response.json();
    expect(usage.requests).toBeGreaterThanOrEqual(8);
    expect(usage.requests).toBeLessThanOrEqual(9);
    expect(usage.granularity).toBe('minute');
  });
});
