import {
  DELIVERY_RETENTION_MS,
  RECENT_DELIVERIES_MAX,
  type AlertEvent,
  type AlertStore,
  type DeliveryRecord,
  type StreamedEvent,
  type WebhookRecord,
} from '../alert-types.js';
import type { AuditEvent } from '../audit-types.js';

const clone = <T>(value: T): T => structuredClone(value);

/** The alert stream of one process: an in-process queue with the Redis stream's pending and claim rules. */
export class MemoryAlertStore implements AlertStore {
  private readonly webhooks = new Map<string, Map<string, WebhookRecord>>();
  private readonly queue: StreamedEvent[] = [];
  private readonly pending = new Map<string, { event: StreamedEvent; consumer: string; readAtMs: number }>();
  private readonly markers = new Map<string, number>();
  private readonly deliveries = new Map<string, { delivery: DeliveryRecord; event: AlertEvent; expiresAtMs: number }>();
  private readonly due = new Map<string, number>();
  private recent: string[] = [];
  private sequence = 0;

  constructor(
    private readonly now: () => number = Date.now,
    /** Where the audit entries of webhook changes go (the memory store's audit log). */
    private readonly appendAudit: (event: AuditEvent) => void = () => undefined,
  ) {}

  async addWebhook(webhook: WebhookRecord, audit: AuditEvent): Promise<void> {
    const own = this.webhooks.get(webhook.project_id) ?? new Map<string, WebhookRecord>();
    own.set(webhook.id, clone(webhook));
    this.webhooks.set(webhook.project_id, own);
    this.appendAudit(audit);
  }

  async listWebhooks(projectId: string): Promise<WebhookRecord[]> {
    return [...(this.webhooks.get(projectId)?.values() ?? [])].map(clone);
  }

  /** The thresholds the project's own webhooks are told of (the settlement checks them too). */
  ownThresholds(projectId: string): number[] {
    return [...(this.webhooks.get(projectId)?.values() ?? [])].flatMap((webhook) => webhook.thresholds);
  }

  async removeWebhook(projectId: string, webhookId: string, audit: AuditEvent): Promise<boolean> {
    const removed = this.webhooks.get(projectId)?.delete(webhookId) ?? false;
    if (removed) this.appendAudit(audit);
    return removed;
  }

  /** A deleted project's webhooks go with it (the Redis store keeps them under the project's keys). */
  dropProject(projectId: string): void {
    this.webhooks.delete(projectId);
  }

  async append(event: AlertEvent): Promise<void> {
    this.queue.push({ entryId: `${this.now()}-${this.sequence++}`, event: clone(event) });
  }

  async appendOnce(marker: string, ttlMs: number, event: AlertEvent): Promise<boolean> {
    const expiresAt = this.markers.get(marker);
    if (expiresAt !== undefined && expiresAt > this.now()) return false;
    this.markers.set(marker, this.now() + ttlMs);
    await this.append(event);
    return true;
  }

  async readNew(consumer: string, count: number): Promise<StreamedEvent[]> {
    const taken = this.queue.splice(0, count);
    for (const event of taken) this.pending.set(event.entryId, { event, consumer, readAtMs: this.now() });
    return taken.map(clone);
  }

  async claimStale(consumer: string, minIdleMs: number, count: number): Promise<StreamedEvent[]> {
    const claimed: StreamedEvent[] = [];
    for (const entry of this.pending.values()) {
      if (claimed.length >= count) break;
      if (this.now() - entry.readAtMs < minIdleMs) continue;
      entry.consumer = consumer;
      entry.readAtMs = this.now();
      claimed.push(clone(entry.event));
    }
    return claimed;
  }

  async schedule(entryId: string, event: AlertEvent, deliveries: DeliveryRecord[], nowMs: number): Promise<void> {
    for (const delivery of deliveries) {
      if (this.deliveries.has(delivery.id)) continue;
      this.deliveries.set(delivery.id, { delivery: clone(delivery), event: clone(event), expiresAtMs: this.now() + DELIVERY_RETENTION_MS });
      this.due.set(delivery.id, nowMs);
      this.recent.push(delivery.id);
    }
    if (this.recent.length > RECENT_DELIVERIES_MAX) {
      for (const id of this.recent.splice(0, this.recent.length - RECENT_DELIVERIES_MAX)) this.deliveries.delete(id);
    }
    this.pending.delete(entryId);
  }

  async claimDue(nowMs: number, leaseMs: number, count: number): Promise<string[]> {
    const ids = [...this.due].filter(([, at]) => at <= nowMs).sort((a, b) => a[1] - b[1]).slice(0, count).map(([id]) => id);
    for (const id of ids) this.due.set(id, nowMs + leaseMs);
    return ids;
  }

  async getDelivery(deliveryId: string): Promise<{ delivery: DeliveryRecord; event: AlertEvent } | null> {
    const stored = this.deliveries.get(deliveryId);
    if (!stored || stored.expiresAtMs <= this.now()) return null;
    return clone({ delivery: stored.delivery, event: stored.event });
  }

  async saveDelivery(delivery: DeliveryRecord, nextAttemptMs: number | null): Promise<void> {
    const stored = this.deliveries.get(delivery.id);
    if (!stored) {
      this.due.delete(delivery.id);
      return;
    }
    stored.delivery = clone(delivery);
    stored.expiresAtMs = this.now() + DELIVERY_RETENTION_MS;
    if (nextAttemptMs === null) this.due.delete(delivery.id);
    else this.due.set(delivery.id, nextAttemptMs);
  }

  async recentDeliveries(limit: number): Promise<DeliveryRecord[]> {
    return this.recent
      .slice(-limit)
      .reverse()
      .map((id) => this.deliveries.get(id))
      .filter((stored) => stored !== undefined && stored.expiresAtMs > this.now())
      .map((stored) => clone(stored!.delivery));
  }
}
