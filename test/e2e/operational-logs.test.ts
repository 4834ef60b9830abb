import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoConfig, GatewayProcess } from '../support/gateway-process.js';
import { freePort, RedisProcess } from '../support/redis-server.js';
import { ADMIN_TOKEN, type TestProject } from '../support/test-app.js';

const CONFIG = echoConfig({ commandTimeoutMs: 300, flushIntervalMs: 100 });

const parse = (line: string) => JSON.parse(line) as { level: number; msg: string } & Record<string, unknown>;
const jsonLines = (gateway: GatewayProcess) => gateway.logs.filter((line) => line.startsWith('{')).map(parse);

async function metricValue(gateway: GatewayProcess, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The real process: what it logs when Redis is away at start-up, goes away, comes back, and at shutdown. */
describe('logs about the store, from start-up to shutdown', () => {
  let redisPort: number;
  let redis: RedisProcess | undefined;
  let gateway: GatewayProcess;
  let project: TestProject;

  beforeAll(async () => {
    redisPort = await freePort();
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: `redis://127.0.0.1:${redisPort}`, NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'info' },
      configYaml: CONFIG,
      waitForReady: false,
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    await redis?.stop();
  });

  it('names host:port and the cause when Redis is unreachable at start-up, and does not say ready', async () => {
    const line = parse(await gateway.waitForLog(/is not reachable/));
    expect(line.level).toBe(40);
    expect(line.msg).toContain(`Redis at 127.0.0.1:${redisPort} is not reachable (connection refused)`);
    await waitFor(async () => (await fetch(`${gateway.url}/livez`).catch(() => null))?.status === 200);
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(503);
    expect(gateway.logs.some((candidate) => candidate.includes('nova-gateway ready'))).toBe(false);
  });

  it('says when Redis is reachable, then ready, once /readyz is 200', async () => {
    redis = await RedisProcess.start({ port: redisPort, args: ['--maxmemory-policy', 'allkeys-lru'] });
    await gateway.waitUntilReady();
    await gateway.waitForLog(/nova-gateway ready/);
    const messages = jsonLines(gateway).map((line) => line.msg);
    const reachable = messages.findIndex((msg) => msg === `Redis at 127.0.0.1:${redisPort} is reachable`);
    expect(reachable).toBeGreaterThanOrEqual(0);
    expect(messages.indexOf('nova-gateway ready')).toBeGreaterThan(reachable);
    expect(messages.filter((msg) => msg === 'nova-gateway ready')).toHaveLength(1);
  });

  it('warns, naming the setting, when Redis may evict keys or keeps no persistence', async () => {
    const eviction = parse(await gateway.waitForLog(/maxmemory-policy is allkeys-lru/));
    expect(eviction.level).toBe(40);
    expect(eviction.msg).toContain('set maxmemory-policy noeviction');
    const persistence = parse(await gateway.waitForLog(/persistence is off/));
    expect(persistence.level).toBe(40);
    expect(persistence.msg).toContain('appendonly');
  });

  it('logs one warn line per outage (not one per request) and counts the failed requests in a metric', async () => {
    const created = await fetch(`${gateway.url}/admin/v1/projects`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'logs' }),
    });
    const body = (await created.json()) as { id: string; api_key: { secret: string } };
    project = { projectId: body.id, keyId: '', secret: body.api_key.secret, auth: { authorization: `Bearer ${body.api_key.secret}` } };
    const keysUrl = `${gateway.url}/v1/api-keys?project_id=${project.projectId}`;
    expect((await fetch(keysUrl, { headers: project.auth })).status).toBe(200);
    const before = gateway.logs.length;
    const requestErrorsBefore = await metricValue(gateway, 'nova_redis_errors_total{operation="request"}');

    await redis!.shutdownWithSave();
    const REQUESTS = 20;
    for (let i = 0; i < REQUESTS; i++) expect((await fetch(keysUrl, { headers: project.auth })).status).toBe(503);

    const during = gateway.logs.slice(before).filter((line) => line.startsWith('{')).map(parse);
    const warnings = during.filter((line) => line.level >= 40);
    expect(warnings).toHaveLength(1);
    // SHUTDOWN closes the socket: the client sees a close or a reset, then refused reconnections.
    expect(warnings[0]!.msg).toMatch(
      new RegExp(`^Redis at 127\\.0\\.0\\.1:${redisPort} is unreachable \\(connection (closed|reset|refused)\\): requests that need it answer 503 until it is back`),
    );
    expect(gateway.logs.slice(before).join('\n')).not.toMatch(/\n\s+at |"stack"/);
    expect((await metricValue(gateway, 'nova_redis_errors_total{operation="request"}')) - requestErrorsBefore).toBe(REQUESTS);
    expect(await metricValue(gateway, 'nova_store_reachable')).toBe(0);

    await redis!.spawn();
    const back = parse(await gateway.waitForLog(/is reachable again/));
    expect(back.level).toBe(30);
    expect(back.failed_operations).toBeGreaterThanOrEqual(REQUESTS);
    expect(await metricValue(gateway, 'nova_store_reachable')).toBe(1);
    expect((await fetch(keysUrl, { headers: project.auth })).status).toBe(200);
  });

  it('reports at shutdown how many usage records could not be written', async () => {
    await redis!.stop();
    redis = undefined;
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...project.auth, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: `hello ${i}` }] }),
      });
      expect(response.status).toBe(200);
    }
    const buffered = await metricValue(gateway, 'nova_usage_buffered_records');
    expect(buffered).toBeGreaterThanOrEqual(3);
    gateway.signal('SIGTERM');
    expect(await gateway.waitForExit()).toBe(0);
    const lost = jsonLines(gateway).find((line) => 'usage_records_lost' in line)!;
    expect(lost.level).toBe(40);
    expect(lost.usage_records_lost).toBe(buffered);
    expect(lost.msg).toBe(`${buffered} usage records could not be written to the store and are lost (the store was unreachable at shutdown)`);
  });
});

describe('Redis settings fit for keys and limits', () => {
  it('logs that the settings were checked, and no warning, on noeviction with AOF', async () => {
    const redis = await RedisProcess.start({ args: ['--appendonly', 'yes', '--maxmemory-policy', 'noeviction'] });
    const gateway = await GatewayProcess.start({ env: { REDIS_URL: redis.url, LOG_LEVEL: 'info' }, configYaml: CONFIG });
    try {
      await gateway.waitForLog(/Redis settings checked/);
      expect(jsonLines(gateway).filter((line) => line.level >= 40)).toEqual([]);
    } finally {
      await gateway.stop();
      await redis.stop();
    }
  });
});

describe('port conflicts', () => {
  let holder: Server;
  let busyPort: number;

  beforeAll(async () => {
    busyPort = await freePort();
    // A bare TCP listener, not an upstream: it only holds the port the gateway must find busy.
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(busyPort, '127.0.0.1', resolve));
  });
  afterAll(() => new Promise<void>((resolve) => holder.close(() => resolve())));

  it.each([
    ['PORT', 'HTTP'],
    ['METRICS_PORT', 'metrics'],
  ])('a busy %s is one line naming the port and the variable, and exit 1', async (variable, what) => {
    const gateway = await GatewayProcess.start({ env: { [variable]: String(busyPort), REDIS_URL: '' }, waitForReady: false });
    expect(await gateway.waitForExit()).toBe(1);
    const failures = gateway.logs.filter((line) => line.includes('failed to start'));
    expect(failures).toEqual([
      `nova-gateway failed to start: ${what} port 127.0.0.1:${busyPort} is already in use (${variable}); stop what holds it or choose another port`,
    ]);
    expect(gateway.logs.join('\n')).not.toMatch(/\n\s+at /);
  });
});
