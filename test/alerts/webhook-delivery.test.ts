import { afterEach, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { randomBase62 } from '../../src/core/ids.js';
import { defaultConfig, type GatewayConfig } from '../../src/config/gateway-config.js';
import { parseConfigText } from '../../src/config/load-config.js';
import type { RawGatewayConfig } from '../../src/config/schema.js';
import type { Store } from '../../src/store/types.js';
import { ADMIN_TOKEN, buildTestApp, createProject, createTestStore, type StoreKind, type TestApp } from '../support/test-app.js';
import { until, WebhookReceiver } from './webhook-receiver.js';

const SECRET_ENV = 'TEST_WEBHOOK_SECRET';
const SECRET = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (closers.length > 0) await closers.pop()!();
});

async function receiver(): Promise<WebhookReceiver> {
  const started = await new WebhookReceiver().start();
  closers.push(() => started.stop());
  return started;
}

function alertsConfig(alerts: RawGatewayConfig['alerts']): GatewayConfig {
  return defaultConfig({ alerts: { poll_interval_ms: 20, claim_timeout_ms: 300, retry_delays_ms: [50, 50, 50, 50, 50], delivery_timeout_ms: 500, ...alerts } });
}

async function app(kind: StoreKind, config: GatewayConfig, options: { store?: Store; now?: () => number } = {}): Promise<TestApp> {
  const built = await buildTestApp(kind, { config, store: options.store, deps: { env: { [SECRET_ENV]: SECRET }, now: options.now } });
  closers.push(() => built.close());
  return built;
}

const crossing = (projectId: string, threshold = 0.8) => ({
  type: 'budget.threshold_crossed' as const,
  data: { project_id: projectId, api_key_id: null, budget: 'daily_tokens' as const, period: '2026-11-26', threshold, used: 800, limit: 1000 },
});

async function deliveries(built: TestApp, query = '') {
  const response = await built.app.inject({ method: 'GET', url: `/admin/v1/webhook-deliveries${query}`, headers: admin });
  expect(response.statusCode).toBe(200);
  return response.json().data as { status: string; attempts: number; last_status_code: number | null; event_type: string; webhook_id: string }[];
}

describe('alert webhooks, config validation', () => {
  it('names the field when a standard webhook has no usable secret', () => {
    const yaml = (extra: string) => `models: [{id: echo-1, provider: echo}]\nalerts:\n  webhooks:\n    - url: http://127.0.0.1:9/hook\n${extra}`;
    expect(() => parseConfigText(yaml(''), {})).toThrow('config field "alerts.webhooks[0].secret_env" is required');
    expect(() => parseConfigText(yaml('      secret_env: NOPE\n'), {})).toThrow('alerts.webhooks[0].secret_env" names the environment variable NOPE');
    expect(() => parseConfigText(yaml('      secret_env: S\n'), { S: 'plain' })).toThrow('not a Standard Webhooks secret');
    expect(() => parseConfigText(yaml('      thresholds: [0]\n      format: slack\n'), {})).toThrow('alerts.webhooks[0].thresholds[0]');
    expect(parseConfigText(yaml('      secret_env: S\n'), { S: SECRET }).alerts.webhooks[0]!.thresholds).toEqual([0.5, 0.8, 1.0]);
  });
});

describe.each<StoreKind>(['redis', 'memory'])('alert webhooks (%s)', (kind) => {
  it('signs per Standard Webhooks, matches thresholds, and lists deliveries', async () => {
    const hooks = await receiver();
    const other = await receiver();
    const built = await app(kind, alertsConfig({ webhooks: [{ url: hooks.url, secret_env: SECRET_ENV, thresholds: [0.8] }] }));
    const project = await createProject(built.app);
    const added = await built.app.inject({ method: 'POST', url: `/admin/v1/projects/${project.projectId}/webhooks`, headers: admin, payload: { url: other.url, thresholds: [0.5] } });
    expect(added.statusCode).toBe(200);
    const projectSecret = added.json().secret as string;
    expect(projectSecret).toMatch(/^whsec_/);
    const listed = await built.app.inject({ method: 'GET', url: `/admin/v1/projects/${project.projectId}/webhooks`, headers: admin });
    expect(listed.json().data).toHaveLength(1);
    expect(listed.body).not.toContain(projectSecret.slice(6));

    await built.ctx.alerts.events.emit(crossing(project.projectId, 0.8));
    await built.ctx.alerts.events.emit(crossing(project.projectId, 0.5));
    await until(() => hooks.received.length === 1 && other.received.length === 1);
    for (const [received, secret, threshold] of [[hooks, SECRET, 0.8], [other, projectSecret, 0.5]] as const) {
      const hook = received.received[0]!;
      const payload = new Webhook(secret).verify(hook.body, hook.headers as Record<string, string>) as { type: string; data: Record<string, unknown> };
      expect(payload.type).toBe('budget.threshold_crossed');
      expect(payload.data).toMatchObject({ project_id: project.projectId, api_key_id: null, budget: 'daily_tokens', period: '2026-11-26', threshold, used: 800, limit: 1000 });
      expect(() => new Webhook(secret).verify(hook.body.replace('800', '801'), hook.headers as Record<string, string>)).toThrow();
    }
    await until(async () => (await deliveries(built)).filter((d) => d.status === 'delivered').length === 2);
    const log = await deliveries(built, `?project_id=${project.projectId}&status=delivered`);
    expect(log.map((d) => [d.attempts, d.last_status_code, d.event_type])).toEqual([[1, 200, 'budget.threshold_crossed'], [1, 200, 'budget.threshold_crossed']]);

    const removed = await built.app.inject({ method: 'DELETE', url: `/admin/v1/projects/${project.projectId}/webhooks/${added.json().id}`, headers: admin });
    expect(removed.statusCode).toBe(200);
    const again = await built.app.inject({ method: 'DELETE', url: `/admin/v1/projects/${project.projectId}/webhooks/${added.json().id}`, headers: admin });
    expect(again.statusCode).toBe(404);
  });

  it('refuses bad webhook input naming the parameter', async () => {
    const built = await app(kind, alertsConfig({}));
    const project = await createProject(built.app);
    const post = (payload: Record<string, unknown>) => built.app.inject({ method: 'POST', url: `/admin/v1/projects/${project.projectId}/webhooks`, headers: admin, payload });
    expect((await post({ url: 'ftp://x' })).json().error.param).toBe('url');
    expect((await post({ url: 'http://127.0.0.1:9/x', secret: 'whsec_short' })).json().error.param).toBe('secret');
    expect((await post({ url: 'http://127.0.0.1:9/x', format: 'slack', secret: SECRET })).json().error.param).toBe('secret');
    expect((await post({ url: 'http://127.0.0.1:9/x', thresholds: [-1] })).statusCode).toBe(400);
    const missing = await built.app.inject({ method: 'POST', url: '/admin/v1/projects/proj_nope/webhooks', headers: admin, payload: { url: 'http://127.0.0.1:9/x' } });
    expect(missing.statusCode).toBe(404);
  });

  it('retries after a 500 and after the receiver restarts', async () => {
    const hooks = await receiver();
    hooks.nextStatuses = [500];
    const built = await app(kind, alertsConfig({ webhooks: [{ url: hooks.url, secret_env: SECRET_ENV }] }));
    const project = await createProject(built.app);
    await built.ctx.alerts.events.emit(crossing(project.projectId, 1.0));
    await until(async () => (await deliveries(built)).some((d) => d.status === 'delivered'));
    expect((await deliveries(built))[0]).toMatchObject({ status: 'delivered', attempts: 2, last_status_code: 200 });
    expect(hooks.received).toHaveLength(2);
    expect(hooks.received[0]!.headers['webhook-id']).toBe(hooks.received[1]!.headers['webhook-id']);

    await hooks.stop();
    await built.ctx.alerts.events.emit(crossing(project.projectId, 0.5));
    await until(async () => (await deliveries(built)).some((d) => d.status === 'pending' && d.attempts >= 1 && d.last_status_code === null));
    await hooks.start();
    await until(async () => (await deliveries(built)).every((d) => d.status === 'delivered'));
    expect(hooks.received.map((hook) => JSON.parse(hook.body).data.threshold)).toEqual([1, 1, 0.5]);
  });

  it('gives up after the last retry', async () => {
    const hooks = await receiver();
    hooks.nextStatuses = [503, 503, 503];
    const built = await app(kind, alertsConfig({ webhooks: [{ url: hooks.url, secret_env: SECRET_ENV }], retry_delays_ms: [20, 20] }));
    const project = await createProject(built.app);
    await built.ctx.alerts.events.emit(crossing(project.projectId));
    await until(async () => (await deliveries(built)).some((d) => d.status === 'failed'));
    expect((await deliveries(built))[0]).toMatchObject({ status: 'failed', attempts: 3, last_status_code: 503 });
  });

  it('posts Slack messages as {"text": …}', async () => {
    const hooks = await receiver();
    const built = await app(kind, alertsConfig({ webhooks: [{ url: hooks.url, format: 'slack' }] }));
    const project = await createProject(built.app);
    await built.ctx.alerts.events.emit(crossing(project.projectId, 0.8));
    await until(() => hooks.received.length === 1);
    const body = JSON.parse(hooks.received[0]!.body) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['text']);
    expect(body.text).toBe(`Budget alert: Project ${project.projectId} has used 80% of its daily_tokens budget for 2026-11-26 (800 of 1000).`);
    expect(hooks.received[0]!.headers['webhook-signature']).toBeUndefined();
  });

  it('a hanging receiver does not slow requests', async () => {
    const hooks = await receiver();
    const built = await app(kind, alertsConfig({ webhooks: [{ url: hooks.url, secret_env: SECRET_ENV }], delivery_timeout_ms: 2000 }));
    const project = await createProject(built.app);
    const timeRequests = async () => {
      const started = performance.now();
      for (let i = 0; i < 30; i++) {
        const response = await built.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: project.auth, payload: { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] } });
        expect(response.statusCode).toBe(200);
      }
      return performance.now() - started;
    };
    const before = await timeRequests();
    hooks.hang = true;
    for (let i = 0; i < 20; i++) void built.ctx.alerts.events.emit(crossing(project.projectId, 0.8));
    await until(async () => (await deliveries(built)).length === 20);
    const during = await timeRequests();
    // Every delivery slot is held by the hanging receiver while the requests run.
    expect(hooks.received).toHaveLength(0);
    expect(during).toBeLessThan(before * 3 + 250);
  });
});

describe('alert webhooks across replicas (redis)', () => {
  async function pair(config: GatewayConfig, now?: () => number) {
    const prefix = `t${randomBase62(10)}`;
    const stores = [await createTestStore('redis', { prefix }), await createTestStore('redis', { prefix })];
    closers.push(async () => {
      for (const store of stores) await store.close();
    });
    return [await app('redis', config, { store: stores[0], now }), await app('redis', config, { store: stores[1], now })] as const;
  }

  it('delivers an event a stopped replica had read, from another replica', async () => {
    const hooks = await receiver();
    const prefix = `t${randomBase62(10)}`;
    const config = alertsConfig({ webhooks: [{ url: hooks.url, secret_env: SECRET_ENV }] });
    const firstStore = await createTestStore('redis', { prefix });
    const first = await buildTestApp('redis', { config, store: firstStore, deps: { env: { [SECRET_ENV]: SECRET } } });
    const project = await createProject(first.app);
    // The first replica stops its worker, reads the event as it would, and stops before handing it on.
    await first.ctx.alerts.close();
    await first.ctx.alerts.events.emit(crossing(project.projectId));
    expect(await firstStore.alerts.readNew(first.ctx.alerts.worker.consumer, 10)).toHaveLength(1);
    await first.close();
    await firstStore.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(hooks.received).toHaveLength(0);

    const second = await app('redis', config, { store: await createTestStore('redis', { prefix }) });
    closers.push(() => second.store.close());
    await until(() => hooks.received.length === 1);
    expect(JSON.parse(hooks.received[0]!.body).data.project_id).toBe(project.projectId);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(hooks.received).toHaveLength(1);
  });

  it('sends api_key.expiring 7 days and 1 day before expiry, once across two replicas', async () => {
    const hooks = await receiver();
    let clock = Date.now();
    const [a, b] = await pair(alertsConfig({ webhooks: [{ url: hooks.url, secret_env: SECRET_ENV }] }), () => clock);
    const project = await createProject(a.app);
    const expiresAt = new Date(clock + 3 * 86_400_000).toISOString();
    const created = await a.app.inject({ method: 'POST', url: `/admin/v1/projects/${project.projectId}/api-keys`, headers: admin, payload: { name: 'ci-agent', expires_at: expiresAt } });
    expect(created.statusCode).toBe(200);
    const keyId = created.json().id as string;

    await Promise.all([a.ctx.alerts.scanExpiring(), b.ctx.alerts.scanExpiring(), a.ctx.alerts.scanExpiring(), b.ctx.alerts.scanExpiring()]);
    await until(() => hooks.received.length === 1);
    clock += 2.5 * 86_400_000;
    await Promise.all([a.ctx.alerts.scanExpiring(), b.ctx.alerts.scanExpiring()]);
    await until(() => hooks.received.length === 2);
    await Promise.all([a.ctx.alerts.scanExpiring(), b.ctx.alerts.scanExpiring()]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Parsed, not verified: the test clock is days ahead of the library's timestamp check.
    const events = hooks.received.map((hook) => JSON.parse(hook.body) as { type: string; data: Record<string, unknown> });
    expect(events.map((event) => [event.type, event.data.api_key_id, event.data.days_left, event.data.expires_at])).toEqual([
      ['api_key.expiring', keyId, 7, new Date(Date.parse(expiresAt)).toISOString()],
      ['api_key.expiring', keyId, 1, new Date(Date.parse(expiresAt)).toISOString()],
    ]);
  });
});
