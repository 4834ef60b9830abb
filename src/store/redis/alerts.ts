import {
  DELIVERY_RETENTION_MS,
  RECENT_DELIVERIES_MAX,
  type AlertEvent,
  type AlertStore,
  type DeliveryRecord,
  type StreamedEvent,
  type WebhookRecord,
} from '../alert-types.js';
import type { RedisClient } from './connect.js';
import { execAll, guard } from './guard.js';
import { luaScript } from './lua-script.js';
import type { KeyNames } from './key-names.js';
import type { AuditEvent } from '../audit-types.js';
import { auditToFields } from './hash-codecs.js';
import { AUDIT_MAX_LENGTH } from './api-keys.js';

const STREAM_MAX_LENGTH = 100_000;
const GROUP = 'delivery';
const APPEND_ONCE_SCRIPT = luaScript(new URL('./append-alert-once.lua', import.meta.url));
const CLAIM_DUE_SCRIPT = luaScript(new URL('./claim-due-deliveries.lua', import.meta.url));
const SET_WEBHOOK_SCRIPT = luaScript(new URL('./set-webhook.lua', import.meta.url), { AUDIT_MAX_LENGTH });

type Scripted = RedisClient & {
  novaAppendAlertOnce(marker: string, stream: string, ttlMs: number, maxLength: number, event: string): Promise<number>;
  novaClaimDueDeliveries(due: string, nowMs: number, leaseEndMs: number, count: number): Promise<string[]>;
  novaSetWebhook(webhooks: string, thresholds: string, audit: string, change: string): Promise<number>;
};

type StreamEntry = [string, string[]];

/**
 * The stream, its consumer group, the deliveries and their schedule share the `{alerts}` hash tag,
 * so the transactions and scripts below stay in one Redis Cluster slot. A project's webhooks live
 * under the project's own tag, so deleting the project deletes them.
 */
class AlertKeys {
  constructor(
    private readonly prefix: string,
    readonly names: KeyNames,
  ) {}
  events = () => `${this.prefix}:{alerts}:events`;
  due = () => `${this.prefix}:{alerts}:due`;
  recent = () => `${this.prefix}:{alerts}:recent`;
  delivery = (id: string) => `${this.prefix}:{alerts}:delivery:${id}`;
  marker = (name: string) => `${this.prefix}:{alerts}:once:${name}`;
  webhooks = (projectId: string) => this.names.webhooks(projectId);
  thresholds = (projectId: string) => this.names.webhookThresholds(projectId);
}

function streamed(entries: StreamEntry[]): StreamedEvent[] {
  const events: StreamedEvent[] = [];
  for (const entry of entries) {
    // XAUTOCLAIM answers an entry trimmed from the stream meanwhile with no fields.
    const [entryId, fields] = entry;
    const at = fields?.indexOf('event') ?? -1;
    if (at >= 0) events.push({ entryId, event: JSON.parse(fields[at + 1]!) as AlertEvent });
  }
  return events;
}

export class RedisAlertStore implements AlertStore {
  private readonly redis: Scripted;
  private readonly keys: AlertKeys;
  private groupReady = false;

  constructor(redis: RedisClient, prefix: string, names: KeyNames) {
    redis.defineCommand('novaAppendAlertOnce', { numberOfKeys: 2, lua: APPEND_ONCE_SCRIPT });
    redis.defineCommand('novaClaimDueDeliveries', { numberOfKeys: 1, lua: CLAIM_DUE_SCRIPT });
    redis.defineCommand('novaSetWebhook', { numberOfKeys: 3, lua: SET_WEBHOOK_SCRIPT });
    this.redis = redis as Scripted;
    this.keys = new AlertKeys(prefix, names);
  }

  async addWebhook(webhook: WebhookRecord, audit: AuditEvent): Promise<void> {
    await this.setWebhook(webhook.project_id, { change: 'add', id: webhook.id, record: JSON.stringify(webhook) }, audit);
  }

  private async setWebhook(projectId: string, change: { change: 'add' | 'remove'; id: string; record?: string }, audit: AuditEvent): Promise<boolean> {
    const { webhooks, thresholds, names } = this.keys;
    const done = await guard(this.redis.novaSetWebhook(webhooks(projectId), thresholds(projectId), names.audit(projectId), JSON.stringify({ ...change, audit: auditToFields(audit) })));
    return done === 1;
  }

  async listWebhooks(projectId: string): Promise<WebhookRecord[]> {
    const all = await guard(this.redis.hgetall(this.keys.webhooks(projectId)));
    return Object.values(all)
      .map((json) => JSON.parse(json) as WebhookRecord)
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  async removeWebhook(projectId: string, webhookId: string, audit: AuditEvent): Promise<boolean> {
    return this.setWebhook(projectId, { change: 'remove', id: webhookId }, audit);
  }

  async append(event: AlertEvent): Promise<void> {
    await guard(this.redis.xadd(this.keys.events(), 'MAXLEN', '~', STREAM_MAX_LENGTH, '*', 'event', JSON.stringify(event)));
  }

  async appendOnce(marker: string, ttlMs: number, event: AlertEvent): Promise<boolean> {
    const ttl = Math.max(1, Math.ceil(ttlMs));
    return (await guard(this.redis.novaAppendAlertOnce(this.keys.marker(marker), this.keys.events(), ttl, STREAM_MAX_LENGTH, JSON.stringify(event)))) === 1;
  }

  async readNew(consumer: string, count: number): Promise<StreamedEvent[]> {
    // No BLOCK: the client is shared with the request path, which a blocked connection would stall.
    const read = () => this.redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', count, 'STREAMS', this.keys.events(), '>') as Promise<[string, StreamEntry[]][] | null>;
    const answer = await this.withGroup(read);
    return streamed(answer?.[0]?.[1] ?? []);
  }

  async claimStale(consumer: string, minIdleMs: number, count: number): Promise<StreamedEvent[]> {
    const claim = () => this.redis.call('XAUTOCLAIM', this.keys.events(), GROUP, consumer, minIdleMs, '0-0', 'COUNT', count) as Promise<[string, StreamEntry[]]>;
    const answer = await this.withGroup(claim);
    return streamed(answer[1] ?? []);
  }

  /** Runs a group command, creating the group first (from the stream's start: nothing appended before is skipped). */
  private async withGroup<T>(command: () => Promise<T>): Promise<T> {
    if (!this.groupReady) await this.createGroup();
    try {
      return await guard(command());
    } catch (error) {
      if (!/NOGROUP/.test((error as Error).message)) throw error;
      await this.createGroup();
      return guard(command());
    }
  }

  private async createGroup(): Promise<void> {
    try {
      await guard(this.redis.xgroup('CREATE', this.keys.events(), GROUP, '0', 'MKSTREAM'));
    } catch (error) {
      if (!/BUSYGROUP/.test((error as Error).message)) throw error;
    }
    this.groupReady = true;
  }

  async schedule(entryId: string, event: AlertEvent, deliveries: DeliveryRecord[], nowMs: number): Promise<void> {
    const multi = this.redis.multi();
    for (const delivery of deliveries) {
      // NX: a fan-out repeated after a replica stopped between it and the acknowledgement keeps the first.
      multi.set(this.keys.delivery(delivery.id), JSON.stringify({ delivery, event }), 'PX', DELIVERY_RETENTION_MS, 'NX');
      multi.zadd(this.keys.due(), 'NX', nowMs, delivery.id);
      multi.zadd(this.keys.recent(), 'NX', Date.parse(delivery.created_at), delivery.id);
    }
    if (deliveries.length > 0) multi.zremrangebyrank(this.keys.recent(), 0, -(RECENT_DELIVERIES_MAX + 1));
    multi.xack(this.keys.events(), GROUP, entryId);
    multi.xdel(this.keys.events(), entryId);
    await execAll(multi);
  }

  async claimDue(nowMs: number, leaseMs: number, count: number): Promise<string[]> {
    return guard(this.redis.novaClaimDueDeliveries(this.keys.due(), nowMs, nowMs + leaseMs, count));
  }

  async getDelivery(deliveryId: string): Promise<{ delivery: DeliveryRecord; event: AlertEvent } | null> {
    const json = await guard(this.redis.get(this.keys.delivery(deliveryId)));
    return json === null ? null : (JSON.parse(json) as { delivery: DeliveryRecord; event: AlertEvent });
  }

  async saveDelivery(delivery: DeliveryRecord, nextAttemptMs: number | null): Promise<void> {
    const key = this.keys.delivery(delivery.id);
    const stored = await this.getDelivery(delivery.id);
    const multi = this.redis.multi();
    if (stored) multi.set(key, JSON.stringify({ delivery, event: stored.event }), 'PX', DELIVERY_RETENTION_MS);
    if (nextAttemptMs === null || !stored) multi.zrem(this.keys.due(), delivery.id);
    else multi.zadd(this.keys.due(), nextAttemptMs, delivery.id);
    await execAll(multi);
  }

  async recentDeliveries(limit: number): Promise<DeliveryRecord[]> {
    const ids = await guard(this.redis.zrevrange(this.keys.recent(), 0, limit - 1));
    if (ids.length === 0) return [];
    const values = await guard(this.redis.mget(ids.map((id) => this.keys.delivery(id))));
    return values.filter((json): json is string => json !== null).map((json) => (JSON.parse(json) as { delivery: DeliveryRecord }).delivery);
  }
}
