/** Budget alerts and key-expiry notices: webhooks, the event stream and the delivery log (src/alerts/). */

import type { AuditEvent } from './audit-types.js';

export type WebhookFormat = 'standard' | 'slack';

/** The budget fractions a webhook is told of when it names none. */
export const DEFAULT_ALERT_THRESHOLDS: readonly number[] = [0.5, 0.8, 1.0];

/** A project's own webhook, added through the admin API; `secret` (standard format) is never shown again. */
export interface WebhookRecord {
  id: string;
  project_id: string;
  url: string;
  format: WebhookFormat;
  /** The budget fractions whose crossing this webhook is told of. */
  thresholds: number[];
  secret: string | null;
  created_at: string;
}

/** One event, as appended to the stream: `data` is the event's own fields. */
export interface AlertEvent {
  id: string;
  type: string;
  created_at: string;
  project_id: string;
  data: Record<string, unknown>;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** One event to one webhook: created when the event is fanned out, updated after every attempt. */
export interface DeliveryRecord {
  id: string;
  event_id: string;
  event_type: string;
  project_id: string;
  webhook_id: string;
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  last_attempt_at: string | null;
  next_attempt_at: string | null;
  delivered_at: string | null;
}

/** An event read from the stream, with the stream entry to acknowledge once it is fanned out. */
export interface StreamedEvent {
  entryId: string;
  event: AlertEvent;
}

export interface AlertStore {
  /** Adds the project's webhook and its audit entry, together. */
  addWebhook(webhook: WebhookRecord, audit: AuditEvent): Promise<void>;
  listWebhooks(projectId: string): Promise<WebhookRecord[]>;
  /** Removes it and appends the audit entry, together; false (and no entry) when there was none. */
  removeWebhook(projectId: string, webhookId: string, audit: AuditEvent): Promise<boolean>;
  /** Appends an event to the stream every replica's delivery worker reads. */
  append(event: AlertEvent): Promise<void>;
  /**
   * Appends the event only if `marker` was not set before (then sets it, for `ttlMs`), in one step:
   * an event that must be sent once across replicas. Returns whether it was appended.
   */
  appendOnce(marker: string, ttlMs: number, event: AlertEvent): Promise<boolean>;
  /** Events no consumer has read yet; they stay pending for `consumer` until `schedule` acknowledges them. */
  readNew(consumer: string, count: number): Promise<StreamedEvent[]>;
  /** Events another consumer read but did not acknowledge within `minIdleMs` (it stopped): now this consumer's. */
  claimStale(consumer: string, minIdleMs: number, count: number): Promise<StreamedEvent[]>;
  /** Creates the event's deliveries (a delivery that exists already is kept) and acknowledges its entry. */
  schedule(entryId: string, event: AlertEvent, deliveries: DeliveryRecord[], nowMs: number): Promise<void>;
  /** Deliveries due by `nowMs`, each leased to the caller for `leaseMs` (then due again, should the caller stop). */
  claimDue(nowMs: number, leaseMs: number, count: number): Promise<string[]>;
  getDelivery(deliveryId: string): Promise<{ delivery: DeliveryRecord; event: AlertEvent } | null>;
  /** Saves an attempt's outcome: due again at `nextAttemptMs`, or done (null). */
  saveDelivery(delivery: DeliveryRecord, nextAttemptMs: number | null): Promise<void>;
  /** Newest first, at most `limit`. */
  recentDeliveries(limit: number): Promise<DeliveryRecord[]>;
}

/** How long a budget crossing's marker keeps a second copy of its event out of the stream: past its month. */
export const CROSSING_MARKER_MS = 35 * 86_400_000;

/** How many deliveries the delivery log keeps (the newest). */
export const RECENT_DELIVERIES_MAX = 1000;
/** How long a delivery record outlives its last change: past the 24 h of retries. */
export const DELIVERY_RETENTION_MS = 7 * 86_400_000;
