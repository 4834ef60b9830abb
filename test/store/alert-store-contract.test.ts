import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { mintId } from '../../src/core/ids.js';
import type { AlertEvent, DeliveryRecord } from '../../src/store/alert-types.js';
import type { Store } from '../../src/store/types.js';
import { createQuotaStore, QUOTA_STORE_KINDS } from '../support/quota-stores.js';
import { RedisCluster } from '../support/redis-cluster.js';

const event = (projectId: string, n: number): AlertEvent => ({ id: `evt_${n}`, type: 'api_key.expiring', created_at: new Date().toISOString(), project_id: projectId, data: { n } });

const delivery = (e: AlertEvent, webhookId: string): DeliveryRecord => ({
  id: `${e.id}.${webhookId}`,
  event_id: e.id,
  event_type: e.type,
  project_id: e.project_id,
  webhook_id: webhookId,
  status: 'pending',
  attempts: 0,
  last_status_code: null,
  last_error: null,
  created_at: new Date().toISOString(),
  last_attempt_at: null,
  next_attempt_at: null,
  delivered_at: null,
});

describe.each(QUOTA_STORE_KINDS)('alert store contract (%s)', (kind) => {
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  let store: Store;
  const projectId = mintId('proj');
  beforeEach(async () => {
    store = await createQuotaStore(kind, cluster);
  });
  afterEach(() => store.close());

  it('hands each event to one consumer, and a stale one to another', async () => {
    await store.alerts.append(event(projectId, 1));
    await store.alerts.append(event(projectId, 2));
    const first = await store.alerts.readNew('a', 10);
    expect(first.map((e) => e.event.id)).toEqual(['evt_1', 'evt_2']);
    expect(await store.alerts.readNew('b', 10)).toEqual([]);
    expect(await store.alerts.claimStale('b', 60_000, 10)).toEqual([]);
    await store.alerts.schedule(first[0]!.entryId, first[0]!.event, [delivery(first[0]!.event, 'wh_1')], Date.now());
    await sleep(60);
    const claimed = await store.alerts.claimStale('b', 50, 10);
    expect(claimed.map((e) => e.event.id)).toEqual(['evt_2']);
  });

  it('schedules, leases and saves deliveries; keeps the first of a repeated fan-out', async () => {
    await store.alerts.append(event(projectId, 3));
    const [read] = await store.alerts.readNew('a', 10);
    const made = delivery(read!.event, 'wh_1');
    const now = Date.now();
    await store.alerts.schedule(read!.entryId, read!.event, [made], now);
    expect(await store.alerts.claimDue(now, 1000, 10)).toEqual([made.id]);
    expect(await store.alerts.claimDue(now + 500, 1000, 10)).toEqual([]);
    expect(await store.alerts.claimDue(now + 1000, 1000, 10)).toEqual([made.id]);
    await store.alerts.saveDelivery({ ...made, status: 'delivered', attempts: 1, last_status_code: 200 }, null);
    await store.alerts.schedule(read!.entryId, read!.event, [made], now);
    expect((await store.alerts.getDelivery(made.id))?.delivery.status).toBe('delivered');
    expect((await store.alerts.recentDeliveries(10)).map((d) => [d.id, d.status])).toEqual([[made.id, 'delivered']]);
  });

  it('appends an event once per marker', async () => {
    const results = await Promise.all([1, 2, 3].map((n) => store.alerts.appendOnce('m1', 60_000, event(projectId, n))));
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await store.alerts.readNew('a', 10)).toHaveLength(1);
  });

  it('keeps a project webhook list, each change with its audit entry', async () => {
    const webhook = { id: 'wh_a', project_id: projectId, url: 'http://127.0.0.1:9/x', format: 'standard' as const, thresholds: [0.5], secret: 'whsec_x', created_at: new Date().toISOString() };
    const audit = (action: 'webhook.create' | 'webhook.delete') => ({
      action, project_id: projectId, key_id: null, at: new Date().toISOString(), actor: 'admin' as const, actor_key_id: null,
      client_address: '127.0.0.1', request_id: 'req_1', reason: 'wh_a',
    });
    await store.alerts.addWebhook(webhook, audit('webhook.create'));
    expect(await store.alerts.listWebhooks(projectId)).toEqual([webhook]);
    expect(await store.alerts.removeWebhook(projectId, 'wh_a', audit('webhook.delete'))).toBe(true);
    expect(await store.alerts.removeWebhook(projectId, 'wh_a', audit('webhook.delete'))).toBe(false);
    // Newest first: one entry per change made, none for the removal that found nothing.
    expect((await store.audit.list(projectId, 10)).map((entry) => [entry.action, entry.reason])).toEqual([
      ['webhook.delete', 'wh_a'],
      ['webhook.create', 'wh_a'],
    ]);
  });
});
