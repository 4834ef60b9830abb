import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { randomBase62 } from '../../src/core/ids.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { Admission } from '../../src/quota/admission.js';
import { budgetPeriodsAt } from '../../src/quota/budget-periods.js';
import { BufferedUsageMeter } from '../../src/quota/buffered-usage-meter.js';
import type { Charge } from '../../src/quota/request-charge.js';
import { createRedisClient, waitUntilReady, type RedisClient } from '../../src/store/redis/connect.js';
import { KeyNames } from '../../src/store/redis/key-names.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { HOUR_MS } from '../../src/store/usage-types.js';
import { RedisProcess } from '../support/redis-server.js';
import { ADMIN_TOKEN, buildTestApp, createProject } from '../support/test-app.js';

const COMMAND_TIMEOUT_MS = 200;
const PREFIX = `rec${randomBase62(6)}`;
const RESERVED = { tokens: 1000, cost: 0.01 };
const USED = { tokens: 300, cost: 0.003 };

/**
 * A TCP hop in front of Redis that can hold what the client sends (a hung Redis, for that client
 * alone: a command times out, then runs once released) or drop it (it never runs).
 */
class HoldingProxy {
  private held: Array<[Socket, Buffer]> | null = null;
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly server: Server) {}

  static async start(redisPort: number): Promise<HoldingProxy> {
    const server = createServer();
    const proxy = new HoldingProxy(server);
    server.on('connection', (client) => {
      const upstream = connect(redisPort, '127.0.0.1');
      for (const socket of [client, upstream]) {
        proxy.sockets.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => {
          proxy.sockets.delete(socket);
          client.destroy();
          upstream.destroy();
        });
      }
      upstream.on('data', (data) => client.write(data));
      client.on('data', (data) => (proxy.held ? proxy.held.push([upstream, data]) : upstream.write(data)));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    return `redis://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  hold(): void {
    this.held = [];
  }

  /** What was held reaches Redis, in order. */
  release(): void {
    const held = this.held ?? [];
    this.held = null;
    for (const [upstream, data] of held) upstream.write(data);
  }

  /** What was held is lost with its connections: it never runs. */
  drop(): void {
    this.held = null;
    for (const socket of this.sockets) socket.destroy();
  }

  async close(): Promise<void> {
    this.drop();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/**
 * Budget counters after settlements the store did not answer (docs/limits-and-usage.md, "Budgets"):
 * the correction rides on the usage records, and a settlement that still runs late is fenced off,
 * so that whichever order Redis sees them in, the counters end at what was used, once.
 */
/** A key with budgets of its own is corrected with its project, under the same fence (apply-usage.lua). */
describe('budget corrections of unanswered settlements (Redis)', () => {
  let redis: RedisProcess;
  let proxy: HoldingProxy;
  let viaProxy: RedisClient;
  let direct: RedisClient;
  let quotaSide: RedisStore;
  let usageSide: RedisStore;
  const keys = new KeyNames(PREFIX);
  const opened: Admission[] = [];

  beforeAll(async () => {
    redis = await RedisProcess.start();
    proxy = await HoldingProxy.start(redis.port);
    viaProxy = createRedisClient({ url: proxy.url, mode: 'standalone', commandTimeoutMs: COMMAND_TIMEOUT_MS });
    direct = createRedisClient({ url: redis.url, mode: 'standalone', commandTimeoutMs: 2000 });
    for (const client of [viaProxy, direct]) {
      client.on('error', () => undefined);
      expect(await waitUntilReady(client, 5000)).toBe(true);
    }
    // Requests and budgets through the hop; usage records straight to Redis (another connection).
    quotaSide = new RedisStore(viaProxy, PREFIX);
    usageSide = new RedisStore(direct, PREFIX);
  });
  afterEach(() => {
    for (const admission of opened.splice(0)) admission.close();
  });
  afterAll(async () => {
    viaProxy?.disconnect();
    direct?.disconnect();
    await proxy?.close();
    await redis?.stop();
  });

  async function setUp() {
    const projectId = `proj_${randomBase62(10)}`;
    const keyId = `key_${randomBase62(10)}`;
    const budgets = { daily_tokens: 1_000_000_000, monthly_tokens: 1_000_000_000, monthly_cost: 1_000_000 };
    await direct.hset(keys.project(projectId), { requests_per_minute: 1000, burst_limit: 0, ...budgets });
    await direct.hset(keys.apiKey(projectId, keyId), budgets);
    const meter = new BufferedUsageMeter({
      store: usageSide.usage,
      metrics: new Metrics({ defaultMetrics: false }).usage,
      retention: { minuteMs: 48 * HOUR_MS, hourMs: 400 * 24 * HOUR_MS, dedupMs: 86_400_000 },
      maxBuffered: 10_000,
      flushIntervalMs: 600_000,
    });
    const admission = new Admission({ store: quotaSide, config: defaultConfig(), metrics: new Metrics({ defaultMetrics: false }).quota, usage: meter });
    opened.push(admission);
    const charge = { tokens: RESERVED.tokens, rateTokens: RESERVED.tokens, promptTokens: 100, addedOutputLimit: null, cost: RESERVED.cost, pricing: null } as Charge;
    const admit = async () => {
      const decision = await admission.admit(projectId, charge, keyId);
      expect(decision.allowed).toBe(true);
      expect(decision.reservation?.key).toBeTruthy();
      return decision;
    };
    const settle = (decision: Awaited<ReturnType<typeof admit>>) => admission.settle(projectId, decision.reservation!, USED, RESERVED.tokens);
    // The cost counter is a double (quota-batch.lua): to the micro-dollar, the tokens exactly.
    const countersOf = async (budget: string) => {
      const [dt, mt, mc] = await direct.hmget(budget, 'dt', 'mt', 'mc');
      return { dt: Number(dt), mt: Number(mt), mc: Math.round(Number(mc) * 1e6) / 1e6 };
    };
    /** The project's counters; the key's must hold the same (every request is the key's). */
    const counters = async () => {
      const [project, key] = await Promise.all([countersOf(keys.budgets(projectId)), countersOf(keys.keyRate(projectId, keyId, 'budget'))]);
      expect(key).toEqual(project);
      return project;
    };
    /** What settled in the periods (the budget alerts' sums), at both levels. */
    const settled = async () => {
      const sums = async (budget: string) => (await direct.hmget(budget, 'ds', 'ms', 'cs')).map((v) => Math.round(Number(v) * 1e6) / 1e6);
      return { project: await sums(keys.budgets(projectId)), key: await sums(keys.keyRate(projectId, keyId, 'budget')) };
    };
    const fences = async () => (await direct.hkeys(keys.budgets(projectId))).filter((field) => field.startsWith('f'));
    /** Waits until the meter holds the corrections, the project's and the key's (the settlement's timeout has passed). */
    const corrected = () => expect.poll(() => meter.buffered, { timeout: 5000, interval: 20 }).toBe(2);
    return { admit, settle, counters, settled, fences, corrected, meter };
  }

  const once = { dt: USED.tokens, mt: USED.tokens, mc: USED.cost };
  const settledOnce = [USED.tokens, USED.tokens, USED.cost];

  it('a settlement that timed out, then ran: the correction after it counts nothing', async () => {
    const { admit, settle, counters, corrected, meter } = await setUp();
    const decision = await admit();
    expect(decision.source).toBe('store');
    expect(await counters()).toEqual({ dt: RESERVED.tokens, mt: RESERVED.tokens, mc: RESERVED.cost });
    proxy.hold();
    settle(decision);
    await corrected();
    proxy.release();
    await expect.poll(async () => (await counters()).dt, { timeout: 5000, interval: 20 }).toBe(USED.tokens);
    await meter.flush();
    expect(meter.buffered).toBe(0);
    expect(await counters()).toEqual(once);
  });

  it('a settlement that timed out: the correction first, then the settlement runs and skips its budget part', async () => {
    const { admit, settle, counters, settled, fences, corrected, meter } = await setUp();
    const decision = await admit();
    proxy.hold();
    settle(decision);
    await corrected();
    await meter.flush();
    expect(meter.buffered).toBe(0);
    expect(await counters()).toEqual(once);
    expect(await fences()).toHaveLength(1);
    proxy.release();
    // The late settlement ran (it removes the fence it obeyed) and left the counters alone, at both levels.
    await expect.poll(fences, { timeout: 5000, interval: 20 }).toEqual([]);
    expect(await counters()).toEqual(once);
    expect(await settled()).toEqual({ project: settledOnce, key: settledOnce });
  });

  it('a settlement that never reached Redis: the correction puts the use in the counters', async () => {
    const { admit, settle, counters, corrected, meter } = await setUp();
    const decision = await admit();
    proxy.hold();
    settle(decision);
    await corrected();
    proxy.drop();
    await meter.flush();
    expect(await counters()).toEqual(once);
    expect(await waitUntilReady(viaProxy, 5000)).toBe(true);
  });

  it('admitted by the fallback while Redis hangs: the use goes to the counters, the late admission charges nothing', async () => {
    const { admit, settle, counters, settled, corrected, meter } = await setUp();
    settle(await admit());
    await expect.poll(async () => (await counters()).dt, { timeout: 5000, interval: 20 }).toBe(USED.tokens);
    proxy.hold();
    const fallback = await admit();
    expect(fallback.source).toBe('fallback');
    settle(fallback);
    await corrected();
    proxy.release();
    // The held admission has run once this answers (one connection: in order).
    await viaProxy.ping();
    await meter.flush();
    expect(meter.buffered).toBe(0);
    expect(await counters()).toEqual({ dt: 2 * USED.tokens, mt: 2 * USED.tokens, mc: 2 * USED.cost });
    const twice = settledOnce.map((v) => Math.round(2 * v * 1e6) / 1e6);
    expect(await settled()).toEqual({ project: twice, key: twice });
  });
});

describe('budget corrections (memory store)', () => {
  it('a correction with the usage records reaches the budget counters, as on Redis', async () => {
    const t = await buildTestApp('memory');
    try {
      const { projectId } = await createProject(t.app, { name: 'memory budgets' });
      const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
      const patched = await t.app.inject({ method: 'PATCH', url: `/admin/v1/projects/${projectId}`, headers: admin, payload: { daily_tokens: 1000 } });
      expect(patched.statusCode).toBe(200);
      const { day, month } = budgetPeriodsAt(Date.now());
      const correction = { day, month, dayTokens: 900, monthTokens: 0, monthCost: 0, settledDayTokens: 900, settledMonthTokens: 0, settledMonthCost: 0 };
      t.ctx.usage.record({ projectId, requestId: 'fallback1', part: 'budget', budget: correction });
      await (t.ctx.usage as BufferedUsageMeter).flush();
      const ask = (tokens: number) => t.store.quota.admit(projectId, t.ctx.admission.settings, { id: randomBase62(8), tokens, rateTokens: tokens, cost: 0, day, month });
      expect((await ask(101)).refusedBy).toBe('daily_tokens');
      expect((await ask(100)).allowed).toBe(true);
    } finally {
      await t.close();
    }
  });
});
