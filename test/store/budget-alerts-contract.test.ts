import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { budgetPeriodsAt } from '../../src/quota/budget-periods.js';
import type { AlertEvent } from '../../src/store/alert-types.js';
import type { AdmissionRequest, AdmissionSettings, Reservation } from '../../src/store/quota-types.js';
import type { Store } from '../../src/store/types.js';
import { until } from '../alerts/webhook-receiver.js';
import { createQuotaStore, QUOTA_STORE_KINDS } from '../support/quota-stores.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { ADMIN_TOKEN, buildTestApp, createProject, type TestApp, type TestProject } from '../support/test-app.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * Budget alerts (DESIGN.md section 9): a settlement that takes a budget's settled use past a threshold
 * emits `budget.threshold_crossed` once per subject, budget, period and threshold, on memory, Redis and
 * a 3-master Cluster, whichever of two stores (replicas) settles. Reservations of requests in flight
 * are not use.
 */
describe.each(QUOTA_STORE_KINDS)('budget threshold crossings (%s)', (kind) => {
  let cluster: RedisCluster | undefined;
  let store: Store;
  /** A second replica's store on the same Redis (the same store in memory). */
  let other: Store;
  let t: TestApp;
  let sequence = 0;
  const prefix = `ba${Date.now().toString(36)}`;
  const seen: AlertEvent[] = [];

  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
    store = await createQuotaStore(kind, cluster, prefix);
    other = kind === 'memory' ? store : await createQuotaStore(kind, cluster, prefix);
    t = await buildTestApp('memory', { store, config: defaultConfig({ models: [{ id: 'echo-1', provider: 'echo' }] }) });
    // The test reads the stream itself, in place of the delivery worker.
    await t.ctx.alerts.close();
  });
  afterAll(async () => {
    await t?.close();
    if (other !== store) await other?.close();
    await store?.close();
    await cluster?.stop();
  });

  const project = (policy: Record<string, unknown>): Promise<TestProject> => createProject(t.app, { name: 'alerts', ...policy });
  async function key(p: TestProject, body: Record<string, unknown>): Promise<string> {
    const response = await t.app.inject({ method: 'POST', url: '/v1/api-keys', headers: p.auth, payload: { name: 'k', project_id: p.projectId, ...body } });
    expect(response.statusCode, response.body).toBe(200);
    return response.json().id as string;
  }
  const settings = (thresholds = [0.5, 0.8, 1]): AdmissionSettings => ({ ...t.ctx.admission.settings, alertThresholds: thresholds });
  const ask = (tokens: number, keyId?: string): AdmissionRequest => {
    const { day, month } = budgetPeriodsAt(Date.now());
    return { id: `r${kind}${++sequence}`, tokens, rateTokens: tokens, cost: tokens / 1000, day, month, ...(keyId ? { keyId } : {}) };
  };
  async function admitted(s: Store, projectId: string, request: AdmissionRequest, thresholds?: number[]): Promise<Reservation> {
    const decision = await s.quota.admit(projectId, settings(thresholds), request);
    expect(decision.allowed, JSON.stringify(decision)).toBe(true);
    return decision.reservation!;
  }
  /** Admits a request reserving `reserved` and settles it with `used` tokens. */
  async function spend(s: Store, projectId: string, reserved: number, used: number, keyId?: string, thresholds?: number[]): Promise<void> {
    const reservation = await admitted(s, projectId, ask(reserved, keyId), thresholds);
    await s.quota.settle(projectId, settings(thresholds), reservation, { tokens: used, cost: used / 1000 });
  }
  /** The crossings of one project read from the stream so far (the stream is shared by every test). */
  async function crossings(projectId: string): Promise<Array<Record<string, unknown>>> {
    seen.push(...(await store.alerts.readNew('contract', 100)).map(({ event }) => event));
    return seen.filter((event) => event.project_id === projectId && event.type === 'budget.threshold_crossed').map((event) => event.data);
  }
  /** Waits for `count` crossings (the Redis stores move them from the outbox after the settlement), then for strays. */
  async function settledCrossings(projectId: string, count: number) {
    await until(async () => (await crossings(projectId)).length >= count);
    await new Promise((resolve) => setTimeout(resolve, 150));
    return crossings(projectId);
  }

  it("emits each threshold a project's settled use passes, once, with its figures", async () => {
    const p = await project({ daily_tokens: 1000 });
    const { day } = budgetPeriodsAt(Date.now());
    await spend(store, p.projectId, 300, 400);
    expect(await crossings(p.projectId)).toEqual([]);
    // 850 of 1000: past 0.5 and 0.8 in one settlement, told as two events.
    await spend(other, p.projectId, 300, 450);
    await spend(store, p.projectId, 100, 40);
    // 1090: past 1.0 (its reservation fit; the budget then refuses).
    await spend(other, p.projectId, 50, 200);
    // Two replicas move their outboxes at once: the stream's order is theirs.
    const events = (await settledCrossings(p.projectId, 3)).sort((x, y) => Number(x.threshold) - Number(y.threshold));
    expect(events).toEqual([
      { project_id: p.projectId, api_key_id: null, budget: 'daily_tokens', period: day, threshold: 0.5, used: 850, limit: 1000 },
      { project_id: p.projectId, api_key_id: null, budget: 'daily_tokens', period: day, threshold: 0.8, used: 850, limit: 1000 },
      { project_id: p.projectId, api_key_id: null, budget: 'daily_tokens', period: day, threshold: 1, used: 1090, limit: 1000 },
    ]);
  });

  it('counts settled use only: reservations of requests in flight do not cross', async () => {
    const p = await project({ monthly_tokens: 1000 });
    const inFlight = await admitted(store, p.projectId, ask(900));
    await spend(other, p.projectId, 50, 50);
    expect(await settledCrossings(p.projectId, 0)).toEqual([]);
    await store.quota.settle(p.projectId, settings(), inFlight, { tokens: 500, cost: 0.5 });
    const events = await settledCrossings(p.projectId, 1);
    expect(events.map((event) => [event.budget, event.threshold, event.used])).toEqual([['monthly_tokens', 0.5, 550]]);
  });

  it("names the key for a key's own budget, and the project's own webhook thresholds count", async () => {
    const p = await project({ monthly_tokens: 1_000_000 });
    const keyId = await key(p, { budgets: { daily_tokens: 100 } });
    const addHook = async (thresholds: number[]) => {
      const hook = await t.app.inject({
        method: 'POST',
        url: `/admin/v1/projects/${p.projectId}/webhooks`,
        headers: admin,
        payload: { url: 'http://127.0.0.1:9/hook', format: 'slack', thresholds },
      });
      expect(hook.statusCode, hook.body).toBe(200);
      return hook.json().id as string;
    };
    await addHook([0.3]);
    const removed = await addHook([0.6]);
    expect((await t.app.inject({ method: 'DELETE', url: `/admin/v1/projects/${p.projectId}/webhooks/${removed}`, headers: admin })).statusCode).toBe(200);
    // No config thresholds at all: the remaining webhook's 0.3 is told, the removed one's 0.6 is not.
    await spend(store, p.projectId, 40, 35, keyId, []);
    await spend(other, p.projectId, 40, 40, keyId, []);
    const events = await settledCrossings(p.projectId, 1);
    expect(events).toEqual([
      { project_id: p.projectId, api_key_id: keyId, budget: 'daily_tokens', period: budgetPeriodsAt(Date.now()).day, threshold: 0.3, used: 35, limit: 100 },
    ]);
  });

  it('tells each threshold once under concurrent settlements from two replicas', async () => {
    const p = await project({ daily_tokens: 100_000 });
    const keyId = await key(p, { budgets: { daily_tokens: 10_000 } });
    const reservations = await Promise.all(Array.from({ length: 30 }, (_, i) => admitted(i % 2 ? store : other, p.projectId, ask(300, keyId))));
    // 30 x 340 = 10 200: every key threshold passed, the project's 0.5 not (10.2%).
    await Promise.all(reservations.map((reservation, i) => (i % 2 ? other : store).quota.settle(p.projectId, settings(), reservation, { tokens: 340, cost: 0 })));
    const events = (await settledCrossings(p.projectId, 3)).sort((x, y) => Number(x.threshold) - Number(y.threshold));
    expect(events.map((event) => [event.api_key_id, event.threshold])).toEqual([
      [keyId, 0.5],
      [keyId, 0.8],
      [keyId, 1],
    ]);
  });
});
