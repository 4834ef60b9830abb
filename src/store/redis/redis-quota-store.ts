import { needsSettling, type AdmissionDecision, type AdmissionRequest, type AdmissionSettings, type QuotaStore, type RefusedBy, type Reservation, type Settlement } from '../quota-types.js';
import type { RateLimitPolicy } from '../policy.js';
import { inOneWrite, type RedisClient } from './connect.js';
import { luaScript } from './lua-script.js';
import { guard } from './guard.js';
import { TurnBatches } from './turn-batches.js';
import type { KeyNames } from './key-names.js';

/** Values per settlement and per admission in the quota batch script's arguments. */
const SETTLE_FIELDS = 11;
const ADMIT_FIELDS = 5;
/** A project's settlements and admissions of one turn, in one call: quota-batch.lua (its head says how). */
const QUOTA_BATCH_SCRIPT = luaScript(new URL('./quota-batch.lua', import.meta.url), { SETTLE_FIELDS, ADMIT_FIELDS });
const RENEW_LEASES_SCRIPT = luaScript(new URL('./renew-leases.lua', import.meta.url));

type Scripted = RedisClient & {
  novaQuotaBatch(...args: (string | number)[]): Promise<(string | number)[]>;
  novaRenewLeases(...args: (string | number)[]): Promise<number>;
};

const optional = (value: string | number) => (value === '' ? null : Number(value));
/** Values per admission in the quota batch script's reply. */
const DECISION_FIELDS = 24;
/** Most settlements and admissions in one script call, so that no call's work grows without bound. */
const MAX_SETTLEMENTS = 256;
const MAX_ADMISSIONS = 128;

interface Waiting {
  request: AdmissionRequest;
  resolve: (decision: AdmissionDecision) => void;
  reject: (error: unknown) => void;
}

/** One project's admissions and settlements gathered during one event-loop turn: one script call. */
class QuotaBatch {
  readonly settlements: (string | number)[] = [];
  readonly admissions: Waiting[] = [];
  private settledWaiters: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];
  private settledPromise: Promise<void> | undefined;

  constructor(readonly settings: AdmissionSettings) {}

  get full(): boolean {
    return this.settlements.length >= MAX_SETTLEMENTS * SETTLE_FIELDS || this.admissions.length >= MAX_ADMISSIONS;
  }

  /** Resolves when the batch's call has settled what it carried. */
  get settled(): Promise<void> {
    this.settledPromise ??= new Promise<void>((resolve, reject) => this.settledWaiters.push({ resolve, reject }));
    return this.settledPromise;
  }

  done(error?: unknown): void {
    for (const waiter of this.settledWaiters) {
      if (error === undefined) waiter.resolve();
      else waiter.reject(error);
    }
    this.settledWaiters = [];
  }
}

const openBatch = (settings: AdmissionSettings) => new QuotaBatch(settings);

/**
 * Admission, settlement and lease renewal of every limit (quota-batch.lua, renew-leases.lua).
 * What one project asks during one event-loop turn goes in one script call, sent once the turn is
 * over: the settlements of the requests that ended, then the admissions of those that arrived, in
 * order. A busy replica pays one round trip per project and turn, not two per request, and a
 * lone request still leaves within the turn it arrived in.
 */
export class RedisQuotaStore implements QuotaStore {
  private readonly redis: Scripted;
  /** Work waiting for the end of the event-loop turn, by project. */
  private readonly batches = new TurnBatches<QuotaBatch>(
    (batch, projectId) => void this.write(projectId, batch),
    (closing) => inOneWrite(this.redis, closing),
  );

  constructor(
    redis: RedisClient,
    private readonly keys: KeyNames,
  ) {
    redis.defineCommand('novaQuotaBatch', { numberOfKeys: 6, lua: QUOTA_BATCH_SCRIPT });
    redis.defineCommand('novaRenewLeases', { numberOfKeys: 1, lua: RENEW_LEASES_SCRIPT });
    this.redis = redis as Scripted;
  }

  admit(projectId: string, settings: AdmissionSettings, request: AdmissionRequest): Promise<AdmissionDecision> {
    const batch = this.batches.of(projectId, openBatch, settings);
    const decided = new Promise<AdmissionDecision>((resolve, reject) => batch.admissions.push({ request, resolve, reject }));
    // A full batch leaves at once; the project's next work starts a new one.
    if (batch.full) this.batches.closeNow(projectId);
    return decided;
  }

  /** Every caller of a batch gets the outcome of its call. */
  settle(projectId: string, settings: AdmissionSettings, reservation: Reservation, used: Settlement): Promise<void> {
    const batch = this.batches.of(projectId, openBatch, settings);
    batch.settlements.push(
      reservation.slot,
      reservation.rateTokens ?? -1,
      reservation.dayTokens ?? -1,
      reservation.monthTokens ?? -1,
      reservation.monthCost ?? -1,
      used.tokens,
      used.cost,
      reservation.day,
      reservation.month,
      reservation.id,
      reservation.lease ? 1 : 0,
    );
    const settled = batch.settled;
    if (batch.full) this.batches.closeNow(projectId);
    return settled;
  }

  async renew(projectId: string, settings: AdmissionSettings, leaseIds: string[]): Promise<void> {
    if (leaseIds.length === 0) return;
    await guard(this.redis.novaRenewLeases(this.keys.rateLeases(projectId), Math.round(settings.leaseTtlMs), ...leaseIds));
  }

  private async write(projectId: string, batch: QuotaBatch): Promise<void> {
    const { settings, settlements, admissions } = batch;
    const k = this.keys;
    const values: (string | number)[] = [
      Math.round(settings.windowMs),
      settings.subWindows,
      Math.round(settings.burstWindowMs),
      settings.exactLogMax,
      Math.round(settings.leaseTtlMs),
      settings.defaults.requests_per_minute,
      settings.defaults.burst_limit,
      settlements.length / SETTLE_FIELDS,
      ...settlements,
    ];
    for (const { request } of admissions) values.push(request.id, request.tokens, request.cost, request.day, request.month);
    let reply: (string | number)[];
    try {
      reply = await guard(
        this.redis.novaQuotaBatch(
          k.project(projectId),
          k.rateWindow(projectId),
          k.rateBurst(projectId),
          k.rateSubWindows(projectId),
          k.rateLeases(projectId),
          k.budgets(projectId),
          JSON.stringify(values),
        ),
      );
    } catch (error) {
      batch.done(error);
      for (const waiting of admissions) waiting.reject(error);
      return;
    }
    batch.done();
    admissions.forEach((waiting, index) => waiting.resolve(decisionOf(reply, index * DECISION_FIELDS, waiting.request)));
  }
}

/** The decision at `at` in the quota batch script's reply. */
function decisionOf(reply: (string | number)[], at: number, request: AdmissionRequest): AdmissionDecision {
  const value = (offset: number) => Number(reply[at + offset]);
  const policy: RateLimitPolicy = {
    requests_per_minute: value(1),
    burst_limit: value(2),
    tokens_per_minute: optional(reply[at + 3]!),
    max_concurrent_requests: optional(reply[at + 4]!),
    daily_tokens: optional(reply[at + 5]!),
    monthly_tokens: optional(reply[at + 6]!),
    monthly_cost: optional(reply[at + 7]!),
  };
  const refused = reply[at];
  const allowed = refused === '';
  const charged = (offset: number) => (value(offset) < 0 ? null : value(offset));
  const reservation: Reservation = {
    id: request.id,
    slot: value(16),
    rateTokens: charged(17),
    dayTokens: charged(18),
    monthTokens: charged(19),
    monthCost: value(20) === 1 ? request.cost : null,
    // The periods the script charged (see QUOTA_BATCH_SCRIPT), which the settlement must name.
    day: String(reply[at + 22]),
    month: String(reply[at + 23]),
    lease: value(21) === 1,
  };
  return {
    allowed,
    refusedBy: allowed ? null : (refused as RefusedBy),
    policy,
    remaining: value(8),
    resetMs: value(9),
    burstRemaining: value(10),
    burstResetMs: value(11),
    tokensRemaining: value(12),
    tokensResetMs: value(13),
    inFlight: value(14),
    retryAfterMs: value(15),
    reservation: allowed && needsSettling(reservation) ? reservation : null,
  };
}
