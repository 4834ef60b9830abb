import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { budgetPeriodsAt } from '../../src/quota/budget-periods.js';
import type { AdmissionRequest, AdmissionSettings, Reservation } from '../../src/store/quota-types.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/connect.js';
import type { Store } from '../../src/store/types.js';
import { createQuotaStore, QUOTA_STORE_KINDS } from '../support/quota-stores.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { ADMIN_TOKEN, buildTestApp, createProject, type TestApp } from '../support/test-app.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * The limiter's store contract (DESIGN.md section 7), the same on memory, Redis and a 3-master
 * Cluster: token rate reserve-then-settle, concurrency leases, budgets, the sub-window counters,
 * refusals that cost nothing.
 */
describe.each(QUOTA_STORE_KINDS)('limiter contract (%s)', (kind) => {
  let cluster: RedisCluster | undefined;
  let store: Store;
  let t: TestApp;
  let sequence = 0;
  const prefix = `lim${Date.now().toString(36)}`;

  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
    store = await createQuotaStore(kind, cluster, prefix);
    t = await buildTestApp('memory', { store, config: defaultConfig({ models: [{ id: 'echo-1', provider: 'echo', pricing: { input_per_million: 1, output_per_million: 1 } }] }) });
  });
  afterAll(async () => {
    await t?.close();
    await store?.close();
    await cluster?.stop();
  });

  async function project(policy: Record<string, unknown>): Promise<string> {
    const { projectId } = await createProject(t.app, { name: 'limits' });
    const response = await t.app.inject({ method: 'PATCH', url: `/admin/v1/projects/${projectId}`, headers: admin, payload: policy });
    expect(response.statusCode).toBe(200);
    return projectId;
  }

  const settings = (overrides: Partial<AdmissionSettings> = {}): AdmissionSettings => ({ ...t.ctx.admission.settings, ...overrides });
  const ask = (tokens: number, extra: Partial<AdmissionRequest> = {}): AdmissionRequest => {
    const { day, month } = budgetPeriodsAt(Date.now());
    return { id: `r${kind}${++sequence}`, tokens, rateTokens: tokens, cost: 0, day, month, ...extra };
  };

  it('reserves tokens at admission, refuses what would exceed tokens_per_minute, and settles to the real usage', async () => {
    const id = await project({ requests_per_minute: 1000, burst_limit: 0, tokens_per_minute: 100 });
    const s = settings();
    const admitted = [];
    for (let i = 0; i < 3; i++) admitted.push(await store.quota.admit(id, s, ask(32)));
    expect(admitted.map((d) => d.allowed)).toEqual([true, true, true]);
    expect(admitted[2]).toMatchObject({ tokensRemaining: 4, reservation: { rateTokens: 32, lease: false } });
    const refused = await store.quota.admit(id, s, ask(32));
    expect(refused).toMatchObject({ allowed: false, refusedBy: 'tokens', tokensRemaining: 4, reservation: null });
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(s.windowMs + s.windowMs / s.subWindows);
    // The refusal cost nothing: exactly the 4 tokens left still fit.
    const small = await store.quota.admit(id, s, ask(4));
    expect(small).toMatchObject({ allowed: true, tokensRemaining: 0 });
    // Settling one 32-token reservation at 2 real tokens gives 30 back.
    await store.quota.settle(id, s, admitted[0]!.reservation!, { tokens: 2, cost: 0 });
    expect(await store.quota.admit(id, s, ask(31))).toMatchObject({ allowed: false, refusedBy: 'tokens', tokensRemaining: 30 });
    expect(await store.quota.admit(id, s, ask(30))).toMatchObject({ allowed: true, tokensRemaining: 0 });
    // A real usage above the reservation is charged in full (the only overshoot, bounded by that excess).
    await store.quota.settle(id, s, admitted[1]!.reservation!, { tokens: 40, cost: 0 });
    expect(await store.quota.admit(id, s, ask(1))).toMatchObject({ allowed: false, refusedBy: 'tokens', tokensRemaining: 0 });
    // A request larger than the whole rate can never fit: refused with the window as retry.
    const huge = await store.quota.admit(id, s, ask(101));
    expect(huge).toMatchObject({ allowed: false, refusedBy: 'tokens', retryAfterMs: s.windowMs });
  });

  it('charges the token rate its capped share (rateTokens) and the budgets the whole reservation, and settles both to the real usage', async () => {
    const id = await project({ requests_per_minute: 1000, burst_limit: 0, tokens_per_minute: 100, daily_tokens: 1000 });
    const s = settings();
    // An agent's turn: 300 tokens may be produced, the token rate reserves 40 of them.
    const first = await store.quota.admit(id, s, ask(300, { rateTokens: 40 }));
    expect(first).toMatchObject({ allowed: true, tokensRemaining: 60, reservation: { rateTokens: 40, dayTokens: 300 } });
    // The budget holds the whole bound: 700 left, so a second whole bound of 800 does not fit it...
    expect(await store.quota.admit(id, s, ask(800, { rateTokens: 40 }))).toMatchObject({ allowed: false, refusedBy: 'daily_tokens' });
    // ...while the token rate refuses on its own share.
    expect(await store.quota.admit(id, s, ask(300, { rateTokens: 61 }))).toMatchObject({ allowed: false, refusedBy: 'tokens', tokensRemaining: 60 });
    // The real usage, 250, replaces both: the token rate is over by the excess over its share (210),
    // and the budget has exactly 750 left (budgets are checked first).
    await store.quota.settle(id, s, first.reservation!, { tokens: 250, cost: 0 });
    expect(await store.quota.admit(id, s, ask(751, { rateTokens: 0 }))).toMatchObject({ allowed: false, refusedBy: 'daily_tokens' });
    expect(await store.quota.admit(id, s, ask(750, { rateTokens: 0 }))).toMatchObject({ allowed: false, refusedBy: 'tokens', tokensRemaining: 0 });
  });

  it('holds max_concurrent_requests as leases: released on settle, expired without renewal, kept alive by renewal', async () => {
    const id = await project({ requests_per_minute: 1000, burst_limit: 0, max_concurrent_requests: 2 });
    const s = settings({ leaseTtlMs: 600 });
    const first = await store.quota.admit(id, s, ask(0));
    const second = await store.quota.admit(id, s, ask(0));
    expect([first.inFlight, second.inFlight]).toEqual([1, 2]);
    expect(second.reservation).toMatchObject({ lease: true });
    expect(await store.quota.admit(id, s, ask(0))).toMatchObject({ allowed: false, refusedBy: 'concurrency', inFlight: 2 });
    await store.quota.settle(id, s, first.reservation!, { tokens: 0, cost: 0 });
    const third = await store.quota.admit(id, s, ask(0));
    expect(third).toMatchObject({ allowed: true, inFlight: 2 });
    // Renewed leases outlive their TTL; unrenewed ones expire (a dead replica's slots).
    for (let i = 0; i < 4; i++) {
      await sleep(250);
      await store.quota.renew(id, s, [second.reservation!.id, third.reservation!.id]);
    }
    expect(await store.quota.admit(id, s, ask(0))).toMatchObject({ allowed: false, refusedBy: 'concurrency' });
    await sleep(700);
    expect(await store.quota.admit(id, s, ask(0))).toMatchObject({ allowed: true, inFlight: 1 });
  });

  it('settles many requests that end together (one batch on Redis) exactly as one by one: tokens, budgets and leases', async () => {
    const id = await project({ requests_per_minute: 1000, burst_limit: 0, tokens_per_minute: 1000, daily_tokens: 1100, max_concurrent_requests: 10 });
    const s = settings();
    const admitted = [];
    for (let i = 0; i < 10; i++) admitted.push(await store.quota.admit(id, s, ask(100)));
    expect(admitted.every((decision) => decision.allowed)).toBe(true);
    expect(await store.quota.admit(id, s, ask(0))).toMatchObject({ allowed: false, refusedBy: 'concurrency' });
    // All ten in the same turn, each used 10 of its 100: 900 tokens and ten slots come back.
    await Promise.all(admitted.map((decision) => store.quota.settle(id, s, decision.reservation!, { tokens: 10, cost: 0 })));
    expect(await store.quota.admit(id, s, ask(901))).toMatchObject({ allowed: false, refusedBy: 'tokens', tokensRemaining: 900 });
    const next = await store.quota.admit(id, s, ask(900));
    expect(next).toMatchObject({ allowed: true, tokensRemaining: 0, inFlight: 1 });
  });

  it('reserves budgets per UTC period, refuses a spent one, settles to the real usage, and starts again with the next period', async () => {
    const id = await project({ requests_per_minute: 1000, burst_limit: 0, daily_tokens: 100, monthly_cost: 1 });
    const s = settings();
    const first = await store.quota.admit(id, s, ask(60, { cost: 0.5 }));
    expect(first).toMatchObject({ allowed: true, reservation: { dayTokens: 60, monthTokens: null, monthCost: 0.5 } });
    expect(await store.quota.admit(id, s, ask(50, { cost: 0.1 }))).toMatchObject({ allowed: false, refusedBy: 'daily_tokens' });
    expect(await store.quota.admit(id, s, ask(10, { cost: 0.6 }))).toMatchObject({ allowed: false, refusedBy: 'monthly_cost' });
    await store.quota.settle(id, s, first.reservation!, { tokens: 10, cost: 0.05 });
    const second = await store.quota.admit(id, s, ask(50, { cost: 0.9 }));
    expect(second).toMatchObject({ allowed: true });
    // Spent to the token: anything more is refused, even a request that reserves nothing.
    await store.quota.settle(id, s, second.reservation!, { tokens: 90, cost: 0.1 });
    expect(await store.quota.admit(id, s, ask(0))).toMatchObject({ allowed: false, refusedBy: 'daily_tokens' });
    // The next UTC day starts from zero; the month's cost carries on.
    const tomorrow = budgetPeriodsAt(Date.now() + 86_400_000);
    expect(await store.quota.admit(id, s, ask(100, { day: tomorrow.day }))).toMatchObject({ allowed: true });
  });

  it('counts large request rates in sub-window counters: never more than the limit in any rolling window, free again within window + one sub-window', async () => {
    const id = await project({ requests_per_minute: 20, burst_limit: 0 });
    const s = settings({ windowMs: 1000, subWindows: 4, exactLogMax: 5 });
    const times: number[] = [];
    const end = Date.now() + 2600;
    while (Date.now() < end) {
      const decisions = await Promise.all(Array.from({ length: 5 }, () => store.quota.admit(id, s, ask(0))));
      const at = Date.now();
      for (const decision of decisions) if (decision.allowed) times.push(at);
      await sleep(20);
    }
    // From idle the whole limit at once, then nothing until the first sub-window has left.
    expect(times.filter((time) => time - times[0]! < 1000)).toHaveLength(20);
    for (const time of times) expect(times.filter((other) => other > time - 1000 && other <= time).length).toBeLessThanOrEqual(20);
    const second = times.find((time) => time - times[0]! >= 1000)!;
    expect(second - times[0]!).toBeLessThanOrEqual(1000 + 250 + 100);
    expect(times.length).toBeGreaterThanOrEqual(40);
  });

  it('switches between the exact log and the counters on a policy change without admitting more', async () => {
    const id = await project({ requests_per_minute: 2000, burst_limit: 0 });
    const s = settings({ exactLogMax: 10 });
    for (let i = 0; i < 8; i++) expect((await store.quota.admit(id, s, ask(0))).allowed).toBe(true);
    // Down to 10 (the exact log, empty so far): the counters still hold the 8 admitted.
    await t.app.inject({ method: 'PATCH', url: `/admin/v1/projects/${id}`, headers: admin, payload: { requests_per_minute: 10 } });
    const after = await Promise.all(Array.from({ length: 5 }, () => store.quota.admit(id, s, ask(0))));
    expect(after.filter((decision) => decision.allowed)).toHaveLength(2);
  });

  // Redis only: key sizes are Redis's MEMORY USAGE (the Cluster and memory stores keep the same structures).
  it('decides admissions of the same turn (one call on Redis) in order, each after the one before, and settles first', async () => {
    const id = await project({ requests_per_minute: 5, burst_limit: 0, tokens_per_minute: 1000, max_concurrent_requests: 3 });
    const s = settings();
    const together = await Promise.all(Array.from({ length: 5 }, () => store.quota.admit(id, s, ask(100))));
    // Three slots: the first three in, each seeing the ones before it.
    expect(together.map((decision) => decision.allowed)).toEqual([true, true, true, false, false]);
    expect(together.map((decision) => decision.remaining)).toEqual([4, 3, 2, 2, 2]);
    expect(together.map((decision) => decision.inFlight)).toEqual([1, 2, 3, 3, 3]);
    expect(together.map((decision) => decision.tokensRemaining)).toEqual([900, 800, 700, 700, 700]);
    expect(together.slice(3).every((decision) => decision.refusedBy === 'concurrency')).toBe(true);
    // One request ends and three arrive in the same turn: the settlement frees its slot first, so
    // exactly one of them is admitted, and the request rate then refuses the rest.
    const [settled, ...after] = await Promise.all([
      store.quota.settle(id, s, together[0]!.reservation!, { tokens: 0, cost: 0 }),
      ...Array.from({ length: 3 }, () => store.quota.admit(id, s, ask(100))),
    ]);
    expect(settled).toBeUndefined();
    expect(after.map((decision) => decision.allowed)).toEqual([true, false, false]);
    expect(after.map((decision) => decision.inFlight)).toEqual([3, 3, 3]);
    // 700 left after the first three; the settled one gives its 100 back, the new one takes 100.
    expect(after[0]!.tokensRemaining).toBe(700);
  });

  if (kind === 'redis') it('keeps each project key small: no key above 64 KB at a million requests a minute', async () => {
    const id = await project({ requests_per_minute: 1_000_000, burst_limit: 0, tokens_per_minute: 1_000_000_000, max_concurrent_requests: 1000 });
    const s = settings({ windowMs: 2000 });
    const held: Reservation[] = [];
    const end = Date.now() + 2500;
    let admitted = 0;
    while (Date.now() < end) {
      const decisions = await Promise.all(Array.from({ length: 200 }, () => store.quota.admit(id, s, ask(50))));
      admitted += decisions.filter((decision) => decision.allowed).length;
      for (const decision of decisions) if (decision.reservation) held.push(decision.reservation);
      await Promise.all(held.splice(0).map((reservation) => store.quota.settle(id, s, reservation, { tokens: 20, cost: 0 })));
    }
    expect(admitted).toBeGreaterThan(2000);
    // At the exact-log maximum (500) the log holds at most 500 members.
    const exact = await project({ requests_per_minute: 500, burst_limit: 0 });
    const logged = await Promise.all(Array.from({ length: 600 }, () => store.quota.admit(exact, s, ask(0))));
    expect(logged.filter((decision) => decision.allowed)).toHaveLength(500);
    console.info(`limiter memory test: ${admitted} admissions in 2.5 s`);
    const redis = createRedisClient({ url: inject('redisUrl'), mode: 'standalone', commandTimeoutMs: 2000 });
    try {
      expect(await waitUntilReady(redis, 5000)).toBe(true);
      const keys = [...(await redis.keys(`${prefix}:{${id}}:rl:*`)), ...(await redis.keys(`${prefix}:{${exact}}:rl:*`))];
      expect(await redis.zcard(`${prefix}:{${exact}}:rl:window`)).toBe(500);
      expect(keys.length).toBeGreaterThan(0);
      for (const key of keys) {
        const bytes = Number(await redis.call('MEMORY', 'USAGE', key));
        console.info(`limiter memory test: ${key.slice(prefix.length)} ${bytes} bytes`);
        expect(bytes, key).toBeLessThan(64 * 1024);
      }
      // Above the exact-log maximum there is no per-request member at all.
      expect(await redis.exists(`${prefix}:{${id}}:rl:window`)).toBe(0);
      expect(await redis.hlen(`${prefix}:{${id}}:rl:sub`)).toBeLessThanOrEqual(2 * (s.subWindows + 1) + 5);
    } finally {
      redis.disconnect();
    }
  });
});
