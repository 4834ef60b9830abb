import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { budgetPeriodsAt } from '../../src/quota/budget-periods.js';
import { defaultConfig } from '../../src/config/gateway-config.js';
import type { Store } from '../../src/store/types.js';
import { createQuotaStore } from '../support/quota-stores.js';
import { burst } from '../support/quota-traffic.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { buildTestApp, createProject, type TestApp } from '../support/test-app.js';

/**
 * Two gateway instances, each with its own Redis connection, share one Redis: a burst of
 * 3 x (R + B) concurrent requests split across both admits exactly R + B, not R + B per
 * replica (the leak of per-replica limiters).
 */
describe.each(['redis', 'cluster'] as const)('rate limit accuracy across two replicas (%s)', (kind) => {
  let cluster: RedisCluster | undefined;
  let stores: Store[];
  let replicas: TestApp[];

  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
    const prefix = `acc${Date.now().toString(36)}`;
    stores = [await createQuotaStore(kind, cluster, prefix), await createQuotaStore(kind, cluster, prefix)];
    const config = defaultConfig({ usage: { flush_interval_ms: 60_000 } });
    replicas = [await buildTestApp('memory', { store: stores[0], config }), await buildTestApp('memory', { store: stores[1], config })];
  });
  afterAll(async () => {
    for (const replica of replicas ?? []) await replica.close();
    for (const store of stores ?? []) await store.close();
    await cluster?.stop();
  });

  it.each([
    { rpm: 20, burst: 10 },
    { rpm: 50, burst: 0 },
    { rpm: 7, burst: 13 },
    // Above rate_limits.exact_log_max (500): the sub-window counters, exact from idle too.
    { rpm: 700, burst: 20 },
  ])('R=$rpm, B=$burst: 3 x (R + B) concurrent requests admit exactly R + B', async ({ rpm, burst: burstLimit }) => {
    const project = await createProject(replicas[0]!.app, { name: 'accuracy', requests_per_minute: rpm, burst_limit: burstLimit });
    const total = 3 * (rpm + burstLimit);
    const result = await burst(replicas.map((replica) => replica.app), project, total);
    expect(result.statuses.sort()).toEqual([200, 429]);
    expect(result.admitted).toBe(rpm + burstLimit);
    expect(result.refused).toBe(total - (rpm + burstLimit));
    // Both replicas served half of the traffic and refused beyond the shared limit.
    const refusedBy = [0, 1].map((r) => result.responses.filter((response, i) => i % 2 === r && response.statusCode === 429).length);
    expect(refusedBy.every((count) => count > 0)).toBe(true);
  });

  it('sub-window counters (R above the exact-log maximum) never admit more than R in any rolling window across both replicas, and free within window + one sub-window', async () => {
    const project = await createProject(replicas[0]!.app, { name: 'sliding', requests_per_minute: 30, burst_limit: 0 });
    const settings = { ...replicas[0]!.ctx.admission.settings, windowMs: 1000, subWindows: 5, exactLogMax: 10 };
    const { day, month } = budgetPeriodsAt(Date.now());
    let id = 0;
    const times: number[] = [];
    const end = Date.now() + 2800;
    while (Date.now() < end) {
      const decisions = await Promise.all(
        Array.from({ length: 8 }, (_, i) => stores[i % 2]!.quota.admit(project.projectId, settings, { id: `s${++id}`, tokens: 0, rateTokens: 0, cost: 0, day, month })),
      );
      const at = Date.now();
      for (const decision of decisions) if (decision.allowed) times.push(at);
      await sleep(15);
    }
    for (const time of times) expect(times.filter((other) => other > time - 1000 && other <= time).length).toBeLessThanOrEqual(30);
    expect(times.filter((time) => time - times[0]! < 1000)).toHaveLength(30);
    const firstAfterWindow = times.find((time) => time - times[0]! >= 1000)!;
    expect(firstAfterWindow - times[0]!).toBeLessThanOrEqual(1000 + 200 + 100);
  });
});
