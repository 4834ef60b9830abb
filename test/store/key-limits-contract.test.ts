import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { budgetPeriodsAt } from '../../src/quota/budget-periods.js';
import type { AdmissionRequest, AdmissionSettings } from '../../src/store/quota-types.js';
import type { Store } from '../../src/store/types.js';
import { createQuotaStore, QUOTA_STORE_KINDS } from '../support/quota-stores.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { ADMIN_TOKEN, buildTestApp, createProject, type TestApp, type TestProject } from '../support/test-app.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * Two levels, one admission (DESIGN.md section 9): a key's own limits and its project's are decided in
 * the same store call, the same on memory, Redis and a 3-master Cluster. A request passes only if both
 * admit it; a refusal at either level charges neither; settlement corrects both.
 */
describe.each(QUOTA_STORE_KINDS)('key limits contract (%s)', (kind) => {
  let cluster: RedisCluster | undefined;
  let store: Store;
  let t: TestApp;
  let sequence = 0;
  const prefix = `kl${Date.now().toString(36)}`;

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

  async function project(policy: Record<string, unknown>): Promise<TestProject> {
    const created = await createProject(t.app, { name: 'two levels' });
    const response = await t.app.inject({ method: 'PATCH', url: `/admin/v1/projects/${created.projectId}`, headers: admin, payload: policy });
    expect(response.statusCode).toBe(200);
    return created;
  }
  async function key(p: TestProject, body: Record<string, unknown>): Promise<string> {
    const response = await t.app.inject({ method: 'POST', url: '/v1/api-keys', headers: p.auth, payload: { name: 'k', project_id: p.projectId, ...body } });
    expect(response.statusCode, response.body).toBe(200);
    return response.json().id as string;
  }

  const settings = (): AdmissionSettings => t.ctx.admission.settings;
  /** `atMs`: the admitting replica's clock, whose UTC day and month the budgets are charged to. */
  const ask = (tokens: number, keyId?: string, atMs = Date.now()): AdmissionRequest => {
    const { day, month } = budgetPeriodsAt(atMs);
    return { id: `r${kind}${++sequence}`, tokens, rateTokens: tokens, cost: 0, day, month, ...(keyId ? { keyId } : {}) };
  };

  it('refuses at the key level first reached, names it, and charges neither level', async () => {
    const p = await project({ requests_per_minute: 5, burst_limit: 0 });
    const keyId = await key(p, { rate_limits: { requests_per_minute: 2 } });
    const s = settings();
    const first = await store.quota.admit(p.projectId, s, ask(0, keyId));
    expect(first).toMatchObject({ allowed: true, level: null, remaining: 4, key: { remaining: 1, policy: { requests_per_minute: 2, burst_limit: null } } });
    expect((await store.quota.admit(p.projectId, s, ask(0, keyId))).allowed).toBe(true);
    const refused = await store.quota.admit(p.projectId, s, ask(0, keyId));
    expect(refused).toMatchObject({ allowed: false, level: 'key', refusedBy: 'requests', remaining: 3, key: { remaining: 0 }, reservation: null });
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    // The key's refusal cost the project nothing: three more fit there, then the project refuses.
    for (let i = 0; i < 3; i++) expect((await store.quota.admit(p.projectId, s, ask(0))).allowed).toBe(true);
    const other = await key(p, { rate_limits: { requests_per_minute: 10 } });
    const byProject = await store.quota.admit(p.projectId, s, ask(0, other));
    expect(byProject).toMatchObject({ allowed: false, level: 'project', refusedBy: 'requests', key: { remaining: 10 } });
  });

  it('reserves and settles tokens, holds leases and budgets at both levels in one call', async () => {
    const p = await project({ requests_per_minute: 1000, burst_limit: 0, tokens_per_minute: 1000, max_concurrent_requests: 10, daily_tokens: 100_000 });
    const keyId = await key(p, { rate_limits: { tokens_per_minute: 100, max_concurrent_requests: 1 }, budgets: { daily_tokens: 150 } });
    const s = settings();
    const a = await store.quota.admit(p.projectId, s, ask(60, keyId));
    expect(a).toMatchObject({ allowed: true, tokensRemaining: 940, key: { tokensRemaining: 40, inFlight: 1 } });
    expect(a.reservation).toMatchObject({ rateTokens: 60, dayTokens: 60, lease: true, key: { keyId, rateTokens: 60, dayTokens: 60, lease: true } });
    // The key's one slot is held: refused there, nothing charged at the project.
    const busy = await store.quota.admit(p.projectId, s, ask(10, keyId));
    expect(busy).toMatchObject({ allowed: false, level: 'key', refusedBy: 'concurrency', tokensRemaining: 940, inFlight: 1 });
    await store.quota.settle(p.projectId, s, a.reservation!, { tokens: 20, cost: 0 });
    const { day, month } = budgetPeriodsAt(Date.now());
    expect(await store.quota.keyBudgetUsage(p.projectId, keyId, day, month)).toEqual({ dayTokens: 20, monthTokens: 0, monthCost: 0 });
    // Settled at 20: 80 tokens and the slot are free again at the key level.
    const b = await store.quota.admit(p.projectId, s, ask(80, keyId));
    expect(b).toMatchObject({ allowed: true, tokensRemaining: 900, key: { tokensRemaining: 0, inFlight: 1 } });
    await store.quota.settle(p.projectId, s, b.reservation!, { tokens: 80, cost: 0 });
    // 100 of the key's 150 daily tokens are spent: 51 more is refused by its budget.
    expect(await store.quota.admit(p.projectId, s, { ...ask(51, keyId), rateTokens: 0 })).toMatchObject({ allowed: false, level: 'key', refusedBy: 'daily_tokens' });
    expect((await store.quota.admit(p.projectId, s, { ...ask(50, keyId), rateTokens: 0 })).allowed).toBe(true);
  });

  it('decides a turn of requests of several keys in order, and applies a PATCH to the next request', async () => {
    const p = await project({ requests_per_minute: 7, burst_limit: 0 });
    const k1 = await key(p, { rate_limits: { requests_per_minute: 3 } });
    const k2 = await key(p, { rate_limits: { requests_per_minute: 3 } });
    const s = settings();
    const decisions = await Promise.all([...Array(5)].flatMap(() => [store.quota.admit(p.projectId, s, ask(0, k1)), store.quota.admit(p.projectId, s, ask(0, k2))]));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(6);
    expect(decisions.filter((d) => d.level === 'key')).toHaveLength(4);
    expect((await store.quota.admit(p.projectId, s, ask(0))).allowed).toBe(true);
    expect((await store.quota.admit(p.projectId, s, ask(0))).level).toBe('project');
    const patched = await t.app.inject({ method: 'PATCH', url: `/v1/api-keys/${k1}`, headers: p.auth, payload: { rate_limits: { requests_per_minute: null } } });
    expect(patched.statusCode, patched.body).toBe(200);
    const after = await store.quota.admit(p.projectId, s, ask(0, k1));
    expect(after).toMatchObject({ level: 'project', key: { policy: { requests_per_minute: null } } });
  });

  // Budget periods at a fixed UTC instant: the last millisecond of 30 March 2027, the next day, the next month.
  const MARCH_30_END = Date.parse('2027-03-30T23:59:59.999Z');
  const MARCH_31 = MARCH_30_END + 1;
  const APRIL_1 = Date.parse('2027-04-01T00:00:00.000Z');

  it("starts a key's daily budget again with the next UTC day, carries its month, and starts that with the next month", async () => {
    const p = await project({ requests_per_minute: 1000, burst_limit: 0, daily_tokens: 100_000 });
    const keyId = await key(p, { budgets: { daily_tokens: 100, monthly_tokens: 150 } });
    const s = settings();
    const first = await store.quota.admit(p.projectId, s, ask(60, keyId, MARCH_30_END));
    expect(first).toMatchObject({ allowed: true, reservation: { day: '2027-03-30', key: { keyId, dayTokens: 60, monthTokens: 60, day: '2027-03-30', month: '2027-03' } } });
    expect(await store.quota.admit(p.projectId, s, ask(41, keyId, MARCH_30_END))).toMatchObject({ allowed: false, level: 'key', refusedBy: 'daily_tokens' });
    await store.quota.settle(p.projectId, s, first.reservation!, { tokens: 60, cost: 0 });
    const second = await store.quota.admit(p.projectId, s, ask(40, keyId, MARCH_30_END));
    expect(second.allowed).toBe(true);
    await store.quota.settle(p.projectId, s, second.reservation!, { tokens: 40, cost: 0 });
    // Spent to the token on the 30th: even a request that reserves nothing is refused by the key.
    expect(await store.quota.admit(p.projectId, s, ask(0, keyId, MARCH_30_END))).toMatchObject({ allowed: false, level: 'key', refusedBy: 'daily_tokens' });
    expect(await store.quota.keyBudgetUsage(p.projectId, keyId, '2027-03-30', '2027-03')).toEqual({ dayTokens: 100, monthTokens: 100, monthCost: 0 });
    // One millisecond later the day starts from zero; the month's 100 carry on, so 51 more exceed its 150.
    expect(await store.quota.admit(p.projectId, s, ask(51, keyId, MARCH_31))).toMatchObject({ allowed: false, level: 'key', refusedBy: 'monthly_tokens' });
    const third = await store.quota.admit(p.projectId, s, ask(50, keyId, MARCH_31));
    expect(third).toMatchObject({ allowed: true, level: null, reservation: { key: { day: '2027-03-31', month: '2027-03' } } });
    await store.quota.settle(p.projectId, s, third.reservation!, { tokens: 50, cost: 0 });
    expect(await store.quota.keyBudgetUsage(p.projectId, keyId, '2027-03-31', '2027-03')).toEqual({ dayTokens: 50, monthTokens: 150, monthCost: 0 });
    expect(await store.quota.admit(p.projectId, s, ask(1, keyId, MARCH_31))).toMatchObject({ allowed: false, level: 'key', refusedBy: 'monthly_tokens' });
    // The next month starts both from zero.
    expect(await store.quota.admit(p.projectId, s, ask(100, keyId, APRIL_1))).toMatchObject({ allowed: true, level: null });
    expect(await store.quota.keyBudgetUsage(p.projectId, keyId, '2027-04-01', '2027-04')).toEqual({ dayTokens: 100, monthTokens: 100, monthCost: 0 });
  });

  it("settles a key's budget charge in the period it was charged to, when replicas straddle a UTC day", async () => {
    const p = await project({ requests_per_minute: 1000, burst_limit: 0 });
    const keyId = await key(p, { budgets: { daily_tokens: 45, monthly_tokens: 1000 } });
    const s = settings();
    // Replica b's clock is past midnight (the 30th), a's is not (the 29th): a's request is charged to b's newer day.
    const [aMs, bMs] = [MARCH_30_END - 86_400_000, MARCH_30_END - 86_400_000 + 1];
    const onB = await store.quota.admit(p.projectId, s, ask(37, keyId, bMs));
    expect(onB.allowed).toBe(true);
    await store.quota.settle(p.projectId, s, onB.reservation!, { tokens: 2, cost: 0 });
    const onA = await store.quota.admit(p.projectId, s, ask(37, keyId, aMs));
    expect(onA).toMatchObject({ allowed: true, reservation: { key: { day: '2027-03-30', dayTokens: 37 } } });
    await store.quota.settle(p.projectId, s, onA.reservation!, { tokens: 2, cost: 0 });
    // 2 + 2 used of 45: another 37 fit. Had a's settlement missed the day it was charged to, 39 would stand.
    expect(await store.quota.keyBudgetUsage(p.projectId, keyId, '2027-03-30', '2027-03')).toEqual({ dayTokens: 4, monthTokens: 4, monthCost: 0 });
    const open = await store.quota.admit(p.projectId, s, ask(37, keyId, bMs));
    expect(open.allowed).toBe(true);
    // A charge still open when its day ends is settled in its month, and not in the new day (the 31st).
    expect((await store.quota.admit(p.projectId, s, ask(5, keyId, MARCH_31))).allowed).toBe(true);
    await store.quota.settle(p.projectId, s, open.reservation!, { tokens: 3, cost: 0 });
    expect(await store.quota.keyBudgetUsage(p.projectId, keyId, '2027-03-31', '2027-03')).toEqual({ dayTokens: 5, monthTokens: 4 + 3 + 5, monthCost: 0 });
  });
});
