import { hostname } from 'node:os';
import { request } from 'undici';
import { Agent } from 'undici';
import { randomBase62 } from '../core/ids.js';
import type { AlertEvent, AlertStore, DeliveryRecord } from '../store/alert-types.js';
import { webhookMessage } from './webhook-message.js';
import type { WebhookTarget, WebhookTargets } from './webhook-targets.js';

export interface DeliveryWorkerOptions {
  store: AlertStore;
  targets: WebhookTargets;
  now: () => number;
  /** Waits before the 2nd, 3rd, … attempt; after the last the delivery fails. */
  retryDelaysMs: number[];
  timeoutMs: number;
  concurrency: number;
  pollIntervalMs: number;
  claimTimeoutMs: number;
  onError: (error: unknown, what: string) => void;
}

const MAX_ERROR_LENGTH = 200;

/**
 * Runs on every replica, beside the request path and never on it: it reads the event stream as
 * one consumer of a group (each event goes to one replica; events a stopped replica read are
 * claimed after `claimTimeoutMs`), fans each out to its webhooks as deliveries, and attempts due
 * deliveries, at most `concurrency` at once, each bounded by `timeoutMs`.
 */
export class DeliveryWorker {
  readonly consumer = `${hostname()}-${process.pid}-${randomBase62(8)}`;
  private readonly agent: Agent;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private readonly attempts = new Set<Promise<void>>();
  private closed = false;

  constructor(private readonly options: DeliveryWorkerOptions) {
    this.agent = new Agent({ connections: options.concurrency, headersTimeout: options.timeoutMs, bodyTimeout: options.timeoutMs, connectTimeout: options.timeoutMs });
  }

  start(): this {
    this.timer = setInterval(() => void this.tick(), this.options.pollIntervalMs);
    this.timer.unref();
    return this;
  }

  /** One round: fan out new and stale events, then start due attempts. Resolves when the round (not its attempts) is done. */
  tick(): Promise<void> {
    if (this.ticking || this.closed) return this.ticking ?? Promise.resolve();
    this.ticking = this.round()
      .catch((error: unknown) => this.options.onError(error, 'webhook delivery round'))
      .finally(() => (this.ticking = null));
    return this.ticking;
  }

  /** Waits until every started attempt ended (tests). */
  async settled(): Promise<void> {
    while (this.attempts.size > 0) await Promise.all([...this.attempts]);
  }

  private async round(): Promise<void> {
    const { store, claimTimeoutMs } = this.options;
    const events = [...(await store.claimStale(this.consumer, claimTimeoutMs, 100)), ...(await store.readNew(this.consumer, 100))];
    for (const { entryId, event } of events) await this.fanOut(entryId, event);
    const free = this.options.concurrency - this.attempts.size;
    if (free <= 0) return;
    // The lease outlasts one attempt, so a live replica's attempt is never taken from it.
    const due = await store.claimDue(this.options.now(), this.options.timeoutMs * 2 + 5000, free);
    for (const id of due) {
      const attempt = this.attempt(id).catch((error: unknown) => this.options.onError(error, 'webhook delivery'));
      this.attempts.add(attempt);
      void attempt.finally(() => this.attempts.delete(attempt));
    }
  }

  private async fanOut(entryId: string, event: AlertEvent): Promise<void> {
    const targets = await this.options.targets.matching(event);
    const created = new Date(this.options.now()).toISOString();
    const deliveries: DeliveryRecord[] = targets.map((target) => ({
      id: `${event.id}.${target.id}`,
      event_id: event.id,
      event_type: event.type,
      project_id: event.project_id,
      webhook_id: target.id,
      status: 'pending',
      attempts: 0,
      last_status_code: null,
      last_error: null,
      created_at: created,
      last_attempt_at: null,
      next_attempt_at: created,
      delivered_at: null,
    }));
    await this.options.store.schedule(entryId, event, deliveries, this.options.now());
  }

  private async attempt(deliveryId: string): Promise<void> {
    const { store, targets, now } = this.options;
    const stored = await store.getDelivery(deliveryId);
    if (!stored || stored.delivery.status !== 'pending') {
      if (stored) await store.saveDelivery(stored.delivery, null);
      return;
    }
    const { delivery, event } = stored;
    const target = await targets.find(event.project_id, delivery.webhook_id);
    const startedAt = now();
    delivery.attempts += 1;
    delivery.last_attempt_at = new Date(startedAt).toISOString();
    if (!target) {
      Object.assign(delivery, { status: 'failed', last_error: 'the webhook was removed', next_attempt_at: null });
      return store.saveDelivery(delivery, null);
    }
    const outcome = await this.post(target, event, startedAt);
    delivery.last_status_code = outcome.status;
    delivery.last_error = outcome.error;
    if (outcome.status !== null && outcome.status >= 200 && outcome.status < 300) {
      Object.assign(delivery, { status: 'delivered', delivered_at: new Date(now()).toISOString(), next_attempt_at: null, last_error: null });
      return store.saveDelivery(delivery, null);
    }
    const wait = this.options.retryDelaysMs[delivery.attempts - 1];
    if (wait === undefined) {
      Object.assign(delivery, { status: 'failed', next_attempt_at: null });
      return store.saveDelivery(delivery, null);
    }
    const next = now() + wait;
    delivery.next_attempt_at = new Date(next).toISOString();
    return store.saveDelivery(delivery, next);
  }

  /** One POST; never throws: a refused connection, a timeout or a bad answer is an outcome to retry. */
  private async post(target: WebhookTarget, event: AlertEvent, nowMs: number): Promise<{ status: number | null; error: string | null }> {
    const message = webhookMessage(event, target.format, target.key, nowMs);
    try {
      const answer = await request(target.url, {
        method: 'POST',
        headers: message.headers,
        body: message.body,
        dispatcher: this.agent,
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      await answer.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      const ok = answer.statusCode >= 200 && answer.statusCode < 300;
      return { status: answer.statusCode, error: ok ? null : `the receiver answered ${answer.statusCode}` };
    } catch (error) {
      const reason = (error as { code?: string }).code ?? (error as Error).name ?? 'error';
      return { status: null, error: `${reason}: ${(error as Error).message}`.slice(0, MAX_ERROR_LENGTH) };
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.ticking;
    // Attempts still running end with the agent; their deliveries are due again when their lease ends.
    await this.agent.destroy().catch(() => undefined);
    await Promise.allSettled([...this.attempts]);
  }
}
