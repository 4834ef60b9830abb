import { encodeBase62, randomBase62 } from '../core/ids.js';
import type { AlertEvent, AlertStore } from '../store/alert-types.js';

/** Ids of events (`evt_`) and webhooks (`wh_`), shaped like the gateway's other ids (src/core/ids.ts). */
export function alertId(prefix: 'evt' | 'wh', now: number): string {
  return `${prefix}_${encodeBase62(now, 8)}${randomBase62(14)}`;
}

/** `budget.threshold_crossed`: a subject's use of one budget reached `threshold` of its limit in `period`. */
export interface BudgetThresholdCrossed {
  project_id: string;
  /** Null for the project's own budget. */
  api_key_id: string | null;
  budget: 'daily_tokens' | 'monthly_tokens' | 'monthly_cost';
  /** The budget period, e.g. `2026-11-26` (daily) or `2026-11` (monthly), UTC. */
  period: string;
  threshold: number;
  used: number;
  limit: number;
}

/** `api_key.expiring`: sent 7 days and 1 day before the key's `expires_at`. */
export interface ApiKeyExpiring {
  project_id: string;
  api_key_id: string;
  name: string;
  expires_at: string;
  days_left: 7 | 1;
}

export type AlertEventInput =
  | { type: 'budget.threshold_crossed'; data: BudgetThresholdCrossed }
  | { type: 'api_key.expiring'; data: ApiKeyExpiring };

/**
 * Where events start: appended to the store's stream, from which one replica's delivery worker
 * (src/alerts/delivery-worker.ts) fans them out to the matching webhooks. `budget.threshold_crossed`
 * starts in the store instead, inside the settlement (src/store/redis/quota-batch.lua). Callers on
 * the request path do not await it.
 */
export class AlertEvents {
  constructor(
    private readonly store: AlertStore,
    private readonly now: () => number = Date.now,
  ) {}

  private event(input: AlertEventInput): AlertEvent {
    const time = this.now();
    return { id: alertId('evt', time), type: input.type, created_at: new Date(time).toISOString(), project_id: input.data.project_id, data: { ...input.data } };
  }

  async emit(input: AlertEventInput): Promise<AlertEvent> {
    const event = this.event(input);
    await this.store.append(event);
    return event;
  }

  /** Emits the event unless an event with the same `marker` was emitted within `ttlMs`, on any replica. */
  async emitOnce(marker: string, ttlMs: number, input: AlertEventInput): Promise<AlertEvent | null> {
    const event = this.event(input);
    return (await this.store.appendOnce(marker, ttlMs, event)) ? event : null;
  }
}
