import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { budgetPeriodsAt } from '../../src/quota/budget-periods.js';
import type { AdmissionRequest, AdmissionSettings, Reservation } from '../../src/store/quota-types.js';
import { createRedisClient, waitUntilReady, type RedisClient } from '../../src/store/redis/connect.js';
import { KeyNames } from '../../src/store/redis/key-names.js';
import { RedisQuotaStore } from '../../src/store/redis/redis-quota-store.js';
import { RedisProcess } from '../support/redis-server.js';

/** Commands that are not the script's own work: the call itself and this test's reads of the counts. */
const NOT_SCRIPT_WORK = new Set(['evalsha', 'eval', 'info', 'config|resetstat', 'script|load']);

/**
 * Redis's work for one quota batch script call, counted by Redis itself (INFO commandstats) on a Redis
 * of its own: the commands the script runs must not grow with the requests the call carries.
 */
describe('quota batch script work on Redis', () => {
  let redis: RedisProcess;
  let client: RedisClient;
  let observer: RedisClient;
  let quota: RedisQuotaStore;
  const keys = new KeyNames('work');
  const projectId = 'prj_work';
  // One sub-window of a day: no sub-window ends during the test, so every call finds the same state.
  const settings: AdmissionSettings = {
    windowMs: 86_400_000,
    burstWindowMs: 60_000,
    subWindows: 1,
    exactLogMax: 500,
    leaseTtlMs: 60_000,
    defaults: { requests_per_minute: 60, burst_limit: 0, tokens_per_minute: null, max_concurrent_requests: null, daily_tokens: null, monthly_tokens: null, monthly_cost: null },
  };
  let sequence = 0;
  const ask = (): AdmissionRequest => ({ id: `w${++sequence}`, tokens: 40, rateTokens: 40, cost: 0.001, ...budgetPeriodsAt(Date.now()) });

  beforeAll(async () => {
    redis = await RedisProcess.start();
    client = createRedisClient({ url: redis.url, mode: 'standalone', commandTimeoutMs: 2000 });
    observer = createRedisClient({ url: redis.url, mode: 'standalone', commandTimeoutMs: 2000 });
    expect(await waitUntilReady(client, 5000)).toBe(true);
    expect(await waitUntilReady(observer, 5000)).toBe(true);
    quota = new RedisQuotaStore(client, keys);
    // Every limit set, none reached; requests_per_minute above exactLogMax: the sub-window counters.
    await observer.hset(keys.project(projectId), {
      requests_per_minute: 1_000_000,
      burst_limit: 10,
      tokens_per_minute: 1_000_000_000,
      max_concurrent_requests: 1000,
      daily_tokens: 1_000_000_000,
      monthly_tokens: 1_000_000_000,
      monthly_cost: 1_000_000,
    });
  });
  afterAll(async () => {
    client?.disconnect();
    observer?.disconnect();
    await redis?.stop();
  });

  /** The commands the script ran while `work` did (the store's connection is otherwise idle). */
  async function scriptCommands(work: () => Promise<unknown>): Promise<number> {
    await observer.config('RESETSTAT');
    await work();
    const info = await observer.info('commandstats');
    let calls = 0;
    for (const [, command, count] of info.matchAll(/^cmdstat_([a-z|_-]+):calls=(\d+)/gm)) {
      if (!NOT_SCRIPT_WORK.has(command!)) calls += Number(count);
    }
    return calls;
  }

  const admitTogether = (count: number) => Promise.all(Array.from({ length: count }, () => quota.admit(projectId, settings, ask())));
  const settleTogether = (reservations: Reservation[]) => Promise.all(reservations.map((r) => quota.settle(projectId, settings, r, { tokens: 25, cost: 0.0005 })));

  it('runs as many commands for a turn of 64 admissions, or 64 settlements, as for one', async () => {
    // The first call loads the script (NOSCRIPT, then EVAL) and creates the keys.
    await settleTogether((await admitTogether(1)).map((d) => d.reservation!));

    let one: Reservation[] = [];
    const admitOne = await scriptCommands(async () => (one = (await admitTogether(1)).map((d) => d.reservation!)));
    let many: Reservation[] = [];
    const admitMany = await scriptCommands(async () => {
      const decisions = await admitTogether(64);
      expect(decisions.every((d) => d.allowed)).toBe(true);
      // Each admission saw the ones before it in the same call.
      expect(decisions.map((d) => d.inFlight)).toEqual(Array.from({ length: 64 }, (_, i) => i + 2));
      many = decisions.map((d) => d.reservation!);
    });
    console.info(`script commands: admit ${admitOne}`);
    expect(admitOne).toBeGreaterThan(0);
    expect(admitMany).toBe(admitOne);

    const settleOne = await scriptCommands(() => settleTogether(one));
    const settleMany = await scriptCommands(() => settleTogether(many));
    console.info(`script commands: settle ${settleOne}`);
    expect(settleOne).toBeGreaterThan(0);
    expect(settleMany).toBe(settleOne);

    // The counters hold every request exactly: 66 admitted, each settled from 40 tokens to 25.
    const budgets = await observer.hgetall(keys.budgets(projectId));
    expect(Number(budgets.dt)).toBe(66 * 25);
    expect(Number(budgets.mt)).toBe(66 * 25);
    expect(Number(budgets.mc)).toBeCloseTo(66 * 0.0005, 12);
    expect(await observer.zcard(keys.rateLeases(projectId))).toBe(0);
    const counters = await observer.hgetall(keys.rateSubWindows(projectId));
    expect(Number(counters.rs)).toBe(66);
    expect(Number(counters.ts)).toBe(66 * 25);
  });
});
