import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import type { RawGatewayConfig } from '../../src/config/schema.js';
import type { BufferedUsageMeter } from '../../src/quota/buffered-usage-meter.js';
import { HOUR_MS, MINUTE_MS } from '../../src/store/usage-types.js';
import type { Store } from '../../src/store/types.js';
import { createQuotaStore, QUOTA_STORE_KINDS, type QuotaStoreKind } from '../support/quota-stores.js';
import { burst, hit, manage } from '../support/quota-traffic.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { buildTestApp, createProject, errorOf, type TestApp } from '../support/test-app.js';

/** The quota and usage contract (DESIGN.md section 7), the same on every store. */
describe.each(QUOTA_STORE_KINDS)('quota and usage contract (%s)', (kind: QuotaStoreKind) => {
  let cluster: RedisCluster | undefined;
  const open: { apps: TestApp[]; stores: Store[] }[] = [];

  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
  });
  afterEach(async () => {
    for (const { apps, stores } of open.splice(0)) {
      for (const t of apps) await t.close();
      for (const store of stores) await store.close();
    }
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  /** `replicas` apps sharing one store state (one Redis prefix; for memory, one MemoryStore). */
  async function gateway(overrides: Partial<RawGatewayConfig>, replicas = 1, clocks: Array<() => number> = []) {
    const config = defaultConfig({ usage: { flush_interval_ms: 60_000 }, ...overrides });
    const prefix = `q${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const stores: Store[] = [];
    const apps: TestApp[] = [];
    for (let i = 0; i < replicas; i++) {
      const store = kind === 'memory' && stores[0] ? stores[0] : await createQuotaStore(kind, cluster, prefix);
      if (!stores.includes(store)) stores.push(store);
      apps.push(await buildTestApp('memory', { store, config, deps: clocks[i] ? { now: clocks[i] } : {} }));
    }
    open.push({ apps, stores });
    return { apps, app: apps[0]!, store: stores[0]! };
  }

  const meterOf = (t: TestApp) => t.ctx.usage as BufferedUsageMeter;

  async function requestsIn(store: Store, projectId: string, fromMs: number, toMs: number) {
    const buckets = await store.usage.buckets(projectId, 'minute', fromMs, toMs);
    return buckets.reduce((sum, bucket) => sum + bucket.counts.requests, 0);
  }

  it('admits exactly requests_per_minute + burst_limit concurrent requests from idle, with headers on every response', async () => {
    const { app, store } = await gateway({});
    const project = await createProject(app.app, { name: 'p', requests_per_minute: 5, burst_limit: 3 });
    const started = Date.now();
    const result = await burst([app.app], project, 12);
    expect(result.admitted).toBe(8);
    expect(result.refused).toBe(4);
    for (const response of result.responses) {
      expect(response.headers['x-ratelimit-limit-requests']).toBe('5');
      expect(response.headers['x-ratelimit-remaining-requests']).toMatch(/^\d+$/);
      expect(response.headers['x-ratelimit-reset-requests']).toMatch(/^(\d+ms|\d+(\.\d+)?s|\d+m\d+(\.\d+)?s)$/);
      expect(response.headers['ratelimit-policy']).toBe('"requests";q=5;w=60, "burst";q=3;w=600');
      expect(response.headers.ratelimit).toMatch(/^"requests";r=\d+;t=\d+, "burst";r=\d+;t=\d+$/);
    }
    const refused = result.responses.find((response) => response.statusCode === 429)!;
    expect(errorOf(refused)).toMatchObject({ status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(refused.headers['x-ratelimit-remaining-requests']).toBe('0');
    // The window frees its first slot a minute after the burst; the burst allowance a token
    // per 600/3 = 200 s: the real time until admission is the window's, about 60 s.
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(59);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // Usage counts the admitted requests, once each, and no refusal.
    await meterOf(app).flush();
    expect(await requestsIn(store, project.projectId, started - MINUTE_MS, Date.now() + MINUTE_MS)).toBe(8);
  });

  it('settles a budget charge in the period it was charged to, when replicas straddle a UTC day', async () => {
    // Replica b's clock is a day ahead of a's: a's request is charged to b's (newer) day.
    const { apps } = await gateway({}, 2, [Date.now, () => Date.now() + 86_400_000]);
    const [a, b] = apps as [TestApp, TestApp];
    const project = await createProject(a.app, { name: 'p', daily_tokens: 45 });
    const chat = (t: TestApp) => hit(t.app, project, { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 });
    // Each reserves 37 (the prompt's 17 bytes + 20) and uses 2 (the echo's one word in, one out).
    expect((await chat(b)).statusCode).toBe(200);
    await sleep(100);
    expect((await chat(a)).statusCode).toBe(200);
    await sleep(100);
    // 2 + 2 used of 45: another 37 fit. Had a's settlement missed the day it was charged to, 39 would stand.
    expect((await chat(b)).statusCode).toBe(200);
  });

  it('keeps management routes apart: a project at its model limit still reads usage and changes its policy', async () => {
    const { app } = await gateway({ rate_limits: { management_requests_per_minute: 4 } });
    const project = await createProject(app.app, { name: 'p', requests_per_minute: 2, burst_limit: 0 });
    expect((await burst([app.app], project, 3)).admitted).toBe(2);
    const usage = await app.app.inject({ url: `/v1/projects/${project.projectId}/usage`, headers: project.auth });
    expect(usage.statusCode).toBe(200);
    expect(usage.headers['ratelimit-policy']).toBe('"management";q=4;w=60');
    const patch = (requests: number) =>
      app.app.inject({
        method: 'PATCH',
        url: `/v1/projects/${project.projectId}/rate-limits`,
        headers: project.auth,
        payload: { requests_per_minute: requests },
      });
    expect((await patch(3)).statusCode).toBe(200);
    // The raised policy admits one more model request at once; management traffic consumed none of it.
    expect((await hit(app.app, project)).statusCode).toBe(200);
    expect((await hit(app.app, project)).statusCode).toBe(429);
    // Management traffic has its own limit (4 a window): the usage read and the PATCH used two.
    expect((await manage(app.app, project)).statusCode).toBe(200);
    expect((await manage(app.app, project)).statusCode).toBe(200);
    const refused = await manage(app.app, project);
    expect(errorOf(refused)).toMatchObject({ status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(errorOf(refused).message).toContain('Management request rate limit');
    // Model admissions are still the model policy's: refused by it, not by the management limit.
    expect(errorOf(await hit(app.app, project)).message).not.toContain('Management');
  });

  it('applies a policy change to the next request on every replica', async () => {
    const { apps } = await gateway({}, 2);
    const [a, b] = apps as [TestApp, TestApp];
    const project = await createProject(a.app, { name: 'p', requests_per_minute: 100, burst_limit: 0 });
    expect((await hit(b.app, project)).headers['x-ratelimit-limit-requests']).toBe('100');
    const patched = await a.app.inject({
      method: 'PATCH',
      url: `/v1/projects/${project.projectId}/rate-limits`,
      headers: project.auth,
      payload: { requests_per_minute: 4 },
    });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ id: project.projectId, object: 'nova.resource', status: 'succeeded', requests_per_minute: 4, burst_limit: 0 });
    // One model request is in the window already (the PATCH is management traffic): three more fit, on either replica.
    const next = await hit(b.app, project);
    expect(next.statusCode).toBe(200);
    expect(next.headers['x-ratelimit-limit-requests']).toBe('4');
    expect(next.headers['x-ratelimit-remaining-requests']).toBe('2');
    expect((await hit(a.app, project)).statusCode).toBe(200);
    expect((await hit(b.app, project)).statusCode).toBe(200);
    expect((await hit(b.app, project)).statusCode).toBe(429);
    expect((await hit(a.app, project)).statusCode).toBe(429);
  });

  it('slides the window: no doubling at a boundary, refusals free nothing', async () => {
    const { app } = await gateway({ rate_limits: { window_seconds: 2, burst_window_seconds: 600 } });
    const project = await createProject(app.app, { name: 'p', requests_per_minute: 4, burst_limit: 0 });
    expect((await burst([app.app], project, 2)).admitted).toBe(2);
    const t1 = Date.now(); // the first pair was admitted before this
    await sleep(t1 + 1000 - Date.now());
    const second = await burst([app.app], project, 7);
    const t2 = Date.now();
    expect(second.admitted).toBe(2);
    // The first pair leaves the window 2 s after its admission: at most a second from then.
    const refused = second.responses.find((response) => response.statusCode === 429)!;
    expect(refused.headers['retry-after']).toBe('1');
    // Refusals go on; they must not extend anything.
    await sleep(400);
    expect((await burst([app.app], project, 3)).admitted).toBe(0);
    await sleep(t1 + 2300 - Date.now());
    // Only the first pair has left: exactly 2 admitted (a window that reset would admit 4).
    const third = await burst([app.app], project, 5);
    expect(third.admitted).toBe(2);
    await sleep(t2 + 2100 - Date.now());
    // The second pair has left too; the third pair is still in the window.
    expect((await burst([app.app], project, 5)).admitted).toBe(2);
  });

  it('refills the burst allowance continuously at burst_limit per burst window', async () => {
    const { app } = await gateway({ rate_limits: { window_seconds: 60, burst_window_seconds: 2 } });
    const project = await createProject(app.app, { name: 'p', requests_per_minute: 1, burst_limit: 2 });
    const t0 = Date.now();
    const first = await burst([app.app], project, 4);
    expect(first.admitted).toBe(3);
    // One token takes 2 s / 2 = 1 s.
    expect(first.responses.find((response) => response.statusCode === 429)!.headers['retry-after']).toBe('1');
    await sleep(t0 + 1250 - Date.now());
    expect((await burst([app.app], project, 3)).admitted).toBe(1);
    await sleep(t0 + 3600 - Date.now());
    // Full again, and never above burst_limit.
    expect((await burst([app.app], project, 4)).admitted).toBe(2);
  });

  it('counts usage once per request id and pins [start_time, end_time) at bucket edges', async () => {
    const { app } = await gateway({});
    const project = await createProject(app.app, { name: 'p', requests_per_minute: 1000, burst_limit: 0 });
    const m = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS - 5 * MINUTE_MS;
    const record = (requestId: string, atMs: number, extra = {}) =>
      app.ctx.usage.record({ projectId: project.projectId, requestId, atMs, requests: 1, part: 'request', ...extra });
    record('r-before', m - 1);
    record('r-start', m);
    record('r-last', m + MINUTE_MS - 1);
    record('r-next', m + MINUTE_MS);
    const report = (requestId: string, atMs: number, fields: Record<string, unknown>) =>
      app.ctx.usage.record({ projectId: project.projectId, requestId, atMs, model: 'echo-1', ...fields });
    report('r-start', m, { promptTokens: 7, completionTokens: 5, imageGenerations: 2, audioSeconds: 1.5, storageBytesDelta: 300 });
    report('r-start', m, { promptTokens: 7 }); // the same request's report again: counted once
    // A client reusing its x-request-id: two requests, each admitted and counted.
    record('reused', m + 1000);
    report('reused', m + 1000, { promptTokens: 1 });
    record('reused', m + 2000);
    report('reused', m + 2000, { promptTokens: 1 });
    await meterOf(app).flush();

    const usage = async (query: string) => {
      const response = await app.app.inject({ url: `/v1/projects/${project.projectId}/usage?${query}`, headers: project.auth });
      expect(response.statusCode).toBe(200);
      return response.json();
    };
    const iso = (ms: number) => new Date(ms).toISOString();
    const minute = await usage(`start_time=${iso(m)}&end_time=${iso(m + MINUTE_MS)}`);
    expect(minute).toMatchObject({
      id: project.projectId,
      object: 'nova.resource',
      status: 'succeeded',
      start_time: iso(m),
      end_time: iso(m + MINUTE_MS),
      requests: 4,
      tokens: { prompt: 9, completion: 5, total: 14 },
      image_generations: 2,
      audio_seconds: 1.5,
      storage_bytes: 300,
      granularity: 'minute',
    });
    expect((await usage(`start_time=${iso(m - MINUTE_MS)}&end_time=${iso(m)}`)).requests).toBe(1);
    expect((await usage(`start_time=${iso(m + MINUTE_MS)}&end_time=${iso(m + 2 * MINUTE_MS)}`)).requests).toBe(1);
    const plotted = await usage(`start_time=${iso(m - MINUTE_MS)}&end_time=${iso(m + 2 * MINUTE_MS)}&bucket_width=1m`);
    expect(plotted.requests).toBe(6);
    expect(plotted.bucket_width).toBe('1m');
    expect(plotted.buckets.map((bucket: { requests: number }) => bucket.requests)).toEqual([1, 4, 1]);
    expect(plotted.buckets[1]).toMatchObject({ start_time: iso(m), end_time: iso(m + MINUTE_MS), tokens: { total: 14 } });
  });

  it('answers old windows from hour buckets', async () => {
    const { app } = await gateway({});
    const project = await createProject(app.app, { name: 'p', requests_per_minute: 1000, burst_limit: 0 });
    const hour = Math.floor((Date.now() - 72 * HOUR_MS) / HOUR_MS) * HOUR_MS;
    app.ctx.usage.record({ projectId: project.projectId, requestId: 'old-1', atMs: hour + 10 * MINUTE_MS, requests: 1, part: 'request' });
    app.ctx.usage.record({ projectId: project.projectId, requestId: 'old-2', atMs: hour + HOUR_MS, requests: 1, part: 'request' });
    await meterOf(app).flush();
    const iso = (ms: number) => new Date(ms).toISOString();
    const response = await app.app.inject({
      url: `/v1/projects/${project.projectId}/usage?start_time=${iso(hour)}&end_time=${iso(hour + HOUR_MS)}&bucket_width=1h`,
      headers: project.auth,
    });
    expect(response.json()).toMatchObject({ requests: 1, granularity: 'hour', buckets: [{ requests: 1 }] });
    const tooFine = await app.app.inject({
      url: `/v1/projects/${project.projectId}/usage?start_time=${iso(hour)}&end_time=${iso(hour + HOUR_MS)}&bucket_width=1m`,
      headers: project.auth,
    });
    expect(errorOf(tooFine)).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_parameter', param: 'bucket_width' });
  });
});

