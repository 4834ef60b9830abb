import { Cluster } from 'ioredis';
import { randomBase62 } from '../../core/ids.js';
import { needsSettling, type AdmissionDecision, type KeyReservation, type WindowFigures, type KeyBudgetUsed, type KeyLimits, type LevelFigures, type LimitLevel, type AdmissionRequest, type AdmissionSettings, type QuotaStore, type RefusedBy, type Reservation, type Settlement } from '../quota-types.js';
import type { Priority, RateLimitPolicy } from '../policy.js';
import { priorityOrNull } from './hash-codecs.js';
import { inOneWrite, type RedisClient } from './connect.js';
import { luaScript } from './lua-script.js';
import { guard } from './guard.js';
import { StoreUnavailableError } from '../types.js';
import { SettlementFailedError } from '../store-errors.js';
import { TurnBatches } from './turn-batches.js';
import type { KeyNames } from './key-names.js';
import { CROSSING_MARKER_MS, type AlertStore } from '../alert-types.js';

/** A project's settlements and admissions of one turn, in one call: quota-batch.lua (its head says how). */
const QUOTA_BATCH_SCRIPT = luaScript(new URL('./quota-batch.lua', import.meta.url));
const RENEW_LEASES_SCRIPT = luaScript(new URL('./renew-leases.lua', import.meta.url));

type Scripted = RedisClient & {
  novaQuotaBatch(numberOfKeys: number, ...keysAndBatch: string[]): Promise<string>;
  novaRenewLeases(leases: string, renewal: string): Promise<number>;
};

/** A settlement as quota-batch.lua takes it: a charge that was not made is absent. */
interface SettlementArg {
  id: string;
  slot: number;
  rateTokens?: number;
  dayTokens?: number;
  monthTokens?: number;
  monthCost?: number;
  usedTokens: number;
  usedCost: number;
  day: string;
  month: string;
  lease?: true;
  /** The key level's index in the call's keys (1-based, as Lua counts) and its charges. */
  k?: number;
  key?: { rateTokens?: number; dayTokens?: number; monthTokens?: number; monthCost?: number; day: string; month: string; lease?: true };
}

/** quota-batch.lua's reply: {} for a batch without admissions. */
interface BatchReply {
  /** Redis's time when the script ran (ms). */
  now: string;
  /** The project's alert outbox holds this many events (present when the call settled a budget). */
  outbox?: number;
  /** The batch ran after its lateAfter: its admissions were skipped. */
  late?: true;
  slot: string;
  policy: Record<keyof RateLimitPolicy, number | string | null>;
  /** The limits of each key level the call admitted on. */
  keyPolicies?: Array<{ k: number; policy: Record<keyof RateLimitPolicy, number | string | null> }>;
  decisions: DecisionReply[];
  priority?: Priority;
}

/** A decision as the script returns it: the window figures as decided, and flags for what it charged. */
type DecisionReply = WindowFigures & {
  refusedBy?: RefusedBy;
  chargedRate?: true;
  chargedDay?: true;
  chargedMonth?: true;
  chargedCost?: true;
  lease?: true;
  day: string;
  month: string;
  level?: LimitLevel;
  key?: Omit<DecisionReply, 'key' | 'level'>;
};

/** Most settlements and admissions in one script call, so that no call's work grows without bound. */
const MAX_SETTLEMENTS = 256;
const MAX_ADMISSIONS = 128;

/** A budget-threshold crossing as quota-batch.lua leaves it in the project's outbox. */
interface OutboxCrossing {
  id: string;
  /** Redis's time of the settlement (ms). */
  at: number;
  api_key_id: string | null;
  budget: string;
  period: string;
  threshold: number;
  used: number;
  limit: number;
}

/** Outbox entries moved per read. */
const OUTBOX_READ = 32;

interface Waiting {
  request: AdmissionRequest;
  resolve: (decision: AdmissionDecision) => void;
  reject: (error: unknown) => void;
}

/** One project's admissions and settlements gathered during one event-loop turn: one script call. */
class QuotaBatch {
  readonly settlements: SettlementArg[] = [];
  readonly admissions: Waiting[] = [];
  private settledWaiters: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];
  private settledPromise: Promise<void> | undefined;

  /** The key levels the call names, in the order their keys follow the project's. */
  readonly keyIds: string[] = [];

  constructor(readonly settings: AdmissionSettings) {}

  /** The 1-based index of a key level in the call (as quota-batch.lua counts them). */
  keyIndex(keyId: string): number {
    const at = this.keyIds.indexOf(keyId);
    if (at >= 0) return at + 1;
    return this.keyIds.push(keyId);
  }

  get full(): boolean {
    return this.settlements.length >= MAX_SETTLEMENTS || this.admissions.length >= MAX_ADMISSIONS;
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
  /** Numbers the batches that settle a budget (quota-batch.lua's fence): this replica's id and last number. */
  private readonly replica = randomBase62(10);
  private fences = 0;
  /** Bounds Redis's clock against ours, for quota-batch.lua's lateAfter. */
  private readonly clock = new ClockBound();
  private readonly commandTimeoutMs: number | undefined;
  /** Work waiting for the end of the event-loop turn, by project. */
  private readonly batches = new TurnBatches<QuotaBatch>(
    (batch, projectId) => void this.write(projectId, batch),
    (closing) => inOneWrite(this.redis, closing),
  );

  /** Projects whose alert outbox this replica is moving to the stream. */
  private readonly draining = new Set<string>();

  constructor(
    redis: RedisClient,
    private readonly keys: KeyNames,
    /** Where budget-threshold events go (the alert stream); without it, they wait in the outbox. */
    private readonly alerts?: Pick<AlertStore, 'appendOnce'>,
  ) {
    // Eight keys of the project's, then six of each key level the call names: the count goes first.
    redis.defineCommand('novaQuotaBatch', { lua: QUOTA_BATCH_SCRIPT });
    redis.defineCommand('novaRenewLeases', { numberOfKeys: 1, lua: RENEW_LEASES_SCRIPT });
    this.redis = redis as Scripted;
    this.commandTimeoutMs = redis instanceof Cluster ? redis.options.redisOptions?.commandTimeout : redis.options.commandTimeout;
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
    batch.settlements.push({
      id: reservation.id,
      slot: reservation.slot,
      // undefined: left out of the JSON, as the script takes a charge that was not made
      rateTokens: reservation.rateTokens ?? undefined,
      dayTokens: reservation.dayTokens ?? undefined,
      monthTokens: reservation.monthTokens ?? undefined,
      monthCost: reservation.monthCost ?? undefined,
      usedTokens: used.tokens,
      usedCost: used.cost,
      day: reservation.day,
      month: reservation.month,
      lease: reservation.lease || undefined,
      ...(reservation.key
        ? {
            k: batch.keyIndex(reservation.key.keyId),
            key: {
              rateTokens: reservation.key.rateTokens ?? undefined,
              dayTokens: reservation.key.dayTokens ?? undefined,
              monthTokens: reservation.key.monthTokens ?? undefined,
              monthCost: reservation.key.monthCost ?? undefined,
              day: reservation.key.day,
              month: reservation.key.month,
              lease: reservation.key.lease || undefined,
            },
          }
        : {}),
    });
    const settled = batch.settled;
    if (batch.full) this.batches.closeNow(projectId);
    return settled;
  }

  async keyBudgetUsage(projectId: string, keyId: string, day: string, month: string): Promise<KeyBudgetUsed> {
    const [d, dt, m, mt, mc] = await guard(this.redis.hmget(this.keys.keyRate(projectId, keyId, 'budget'), 'day', 'dt', 'month', 'mt', 'mc'));
    return {
      dayTokens: d === day ? Number(dt ?? 0) : 0,
      monthTokens: m === month ? Number(mt ?? 0) : 0,
      monthCost: m === month ? Number(mc ?? 0) : 0,
    };
  }

  async renew(projectId: string, settings: AdmissionSettings, leaseIds: string[], keyId?: string): Promise<void> {
    if (leaseIds.length === 0) return;
    const renewal = JSON.stringify({ leaseTtlMs: Math.round(settings.leaseTtlMs), ids: leaseIds });
    const leases = keyId === undefined ? this.keys.rateLeases(projectId) : this.keys.keyRate(projectId, keyId, 'leases');
    await guard(this.redis.novaRenewLeases(leases, renewal));
  }

  /**
   * Moves the project's budget-threshold events from its outbox to the alert stream, off the request
   * path. Each goes in at most once (its id is the crossing's: appendOnce), and leaves the outbox only
   * once it is in: a replica that stops midway leaves the rest to the next settlement of a budget.
   */
  private drainOutbox(projectId: string): void {
    if (!this.alerts || this.draining.has(projectId)) return;
    this.draining.add(projectId);
    this.moveCrossings(projectId, this.alerts)
      .catch(() => undefined)
      .finally(() => this.draining.delete(projectId));
  }

  private async moveCrossings(projectId: string, alerts: Pick<AlertStore, 'appendOnce'>): Promise<void> {
    const outbox = this.keys.alertOutbox(projectId);
    for (;;) {
      const entries = await guard(this.redis.lrange(outbox, 0, OUTBOX_READ - 1));
      if (entries.length === 0) return;
      for (const entry of entries) {
        const { id, at, ...data } = JSON.parse(entry) as OutboxCrossing;
        const event = { id, type: 'budget.threshold_crossed', created_at: new Date(at).toISOString(), project_id: projectId, data: { project_id: projectId, ...data } };
        await alerts.appendOnce(`crossing:${id}`, CROSSING_MARKER_MS, event);
        await guard(this.redis.lrem(outbox, 1, entry));
      }
    }
  }

  private async write(projectId: string, batch: QuotaBatch): Promise<void> {
    const { settings, settlements, admissions } = batch;
    const k = this.keys;
    const charged = (c: { dayTokens?: number; monthTokens?: number; monthCost?: number } | undefined) =>
      c !== undefined && (c.dayTokens !== undefined || c.monthTokens !== undefined || c.monthCost !== undefined);
    const budgeted = settlements.some((s) => charged(s) || charged(s.key));
    const fence = budgeted ? { replica: this.replica, seq: ++this.fences } : undefined;
    // After its timeout this replica admits the batch's requests by the fallback: run later (a hung
    // Redis resuming), the admissions would charge budgets for requests charged there too.
    const sentAt = Date.now();
    const ahead = admissions.length > 0 && this.commandTimeoutMs !== undefined ? this.clock.bound(sentAt) : undefined;
    const lateAfter = ahead === undefined ? undefined : sentAt + ahead + this.commandTimeoutMs!;
    const arg = JSON.stringify({
      windowMs: Math.round(settings.windowMs),
      subWindows: settings.subWindows,
      burstWindowMs: Math.round(settings.burstWindowMs),
      exactLogMax: settings.exactLogMax,
      leaseTtlMs: Math.round(settings.leaseTtlMs),
      defaultRequestsPerMinute: settings.defaults.requests_per_minute,
      defaultBurstLimit: settings.defaults.burst_limit,
      projectId,
      keyIds: batch.keyIds,
      thresholds: settings.alertThresholds ?? [],
      settlements,
      fence,
      lateAfter,
      admissions: admissions.map(({ request: { id, tokens, rateTokens, cost, day, month, keyId } }) =>
        keyId === undefined ? { id, tokens, rate: rateTokens, cost, day, month } : { id, tokens, rate: rateTokens, cost, day, month, k: batch.keyIndex(keyId) },
      ),
    });
    const levelKeys: string[] = [];
    for (const keyId of batch.keyIds) {
      levelKeys.push(
        k.apiKey(projectId, keyId),
        k.keyRate(projectId, keyId, 'window'),
        k.keyRate(projectId, keyId, 'burst'),
        k.keyRate(projectId, keyId, 'sub'),
        k.keyRate(projectId, keyId, 'leases'),
        k.keyRate(projectId, keyId, 'budget'),
      );
    }
    let reply: string;
    try {
      reply = await guard(
        this.redis.novaQuotaBatch(
          8 + levelKeys.length,
          k.project(projectId),
          k.rateWindow(projectId),
          k.rateBurst(projectId),
          k.rateSubWindows(projectId),
          k.rateLeases(projectId),
          k.budgets(projectId),
          k.alertOutbox(projectId),
          k.webhookThresholds(projectId),
          ...levelKeys,
          arg,
        ),
      );
    } catch (error) {
      // A budget settlement that may still run names its fence, so the correction sent instead counts once.
      batch.done(fence && error instanceof StoreUnavailableError ? new SettlementFailedError(error.cause, neverSent(error) ? null : fence) : error);
      for (const waiting of admissions) waiting.reject(error);
      return;
    }
    batch.done();
    const { now, late, outbox, slot, policy: stored, keyPolicies, decisions, priority } = JSON.parse(reply) as BatchReply;
    this.clock.observe(sentAt, Number(now) - sentAt);
    if (outbox) this.drainOutbox(projectId);
    if (admissions.length === 0) return;
    if (late) {
      // Answered after all (a busy event loop ran the timeout late): as if it had timed out.
      const error = new StoreUnavailableError(new Error('the quota batch ran after its command timeout'));
      for (const waiting of admissions) waiting.reject(error);
      return;
    }
    // One policy for the batch: the script read the project's once.
    const policy: RateLimitPolicy = {
      requests_per_minute: Number(stored.requests_per_minute),
      burst_limit: Number(stored.burst_limit),
      tokens_per_minute: optional(stored.tokens_per_minute),
      max_concurrent_requests: optional(stored.max_concurrent_requests),
      daily_tokens: optional(stored.daily_tokens),
      monthly_tokens: optional(stored.monthly_tokens),
      monthly_cost: optional(stored.monthly_cost),
    };
    const keyLimits = new Map<number, KeyLimits>();
    for (const { k: index, policy: limits } of keyPolicies ?? []) keyLimits.set(index, keyLimitsOf(limits));
    admissions.forEach((waiting, index) => {
      const keyId = waiting.request.keyId;
      const limits = keyId === undefined ? undefined : keyLimits.get(batch.keyIndex(keyId));
      waiting.resolve({ ...decisionOf(decisions[index]!, policy, Number(slot), waiting.request, limits), priority: priorityOrNull(priority) });
    });
  }
}

/**
 * How far Redis's clock is ahead of this process's, at most: a reply's Redis time minus when its call
 * left bounds it (the script ran after the call left). The least bound of the last minute, so that a
 * clock step on either side is followed within a minute; none before a first reply.
 */
class ClockBound {
  private readonly slots: Array<{ slot: number; bound: number }> = [];

  observe(sentAt: number, bound: number): void {
    const slot = Math.floor(sentAt / 10_000);
    const last = this.slots.at(-1);
    if (last?.slot === slot) last.bound = Math.min(last.bound, bound);
    else {
      this.slots.push({ slot, bound });
      if (this.slots.length > 6) this.slots.shift();
    }
  }

  bound(now: number): number | undefined {
    const from = Math.floor(now / 10_000) - 5;
    let least: number | undefined;
    for (const { slot, bound } of this.slots) if (slot >= from && (least === undefined || bound < least)) least = bound;
    return least;
  }
}

/** ioredis refused the command without writing it (no connection, no offline queue: connect.ts). */
const neverSent = (error: StoreUnavailableError) => /enableOfflineQueue options is false/.test(String((error.cause as Error | undefined)?.message));

const optional = (value: number | string | null) => (value === null ? null : Number(value));

function keyLimitsOf(stored: Record<keyof RateLimitPolicy, number | string | null>): KeyLimits {
  return {
    requests_per_minute: optional(stored.requests_per_minute),
    burst_limit: optional(stored.burst_limit),
    tokens_per_minute: optional(stored.tokens_per_minute),
    max_concurrent_requests: optional(stored.max_concurrent_requests),
    daily_tokens: optional(stored.daily_tokens),
    monthly_tokens: optional(stored.monthly_tokens),
    monthly_cost: optional(stored.monthly_cost),
  };
}

/** A level's window figures as the script returned them. */
function windowFiguresOf(d: WindowFigures): WindowFigures {
  const { remaining, resetMs, burstRemaining, burstResetMs, tokensRemaining, tokensResetMs, inFlight, retryAfterMs } = d;
  return { remaining, resetMs, burstRemaining, burstResetMs, tokensRemaining, tokensResetMs, inFlight, retryAfterMs };
}

/**
 * What the script charged a level: the request's own tokens and cost where flagged, and the periods
 * it charged (the stored ones when newer), which the settlement must name.
 */
function chargesOf(d: Omit<DecisionReply, 'key' | 'level'>, request: AdmissionRequest): Omit<KeyReservation, 'keyId'> {
  return {
    rateTokens: d.chargedRate ? request.rateTokens : null,
    dayTokens: d.chargedDay ? request.tokens : null,
    monthTokens: d.chargedMonth ? request.tokens : null,
    monthCost: d.chargedCost ? request.cost : null,
    day: d.day,
    month: d.month,
    lease: d.lease === true,
  };
}

/** An admission's decision from quota-batch.lua's reply. */
function decisionOf(d: DecisionReply, policy: RateLimitPolicy, slot: number, request: AdmissionRequest, limits?: KeyLimits): AdmissionDecision {
  const allowed = d.level === undefined;
  const kd = d.key;
  const key: LevelFigures | null =
    kd === undefined || limits === undefined
      ? null
      : { policy: limits, ...windowFiguresOf(kd) };
  const reservation: Reservation = {
    id: request.id,
    slot,
    // What the script charged is the request's own tokens and cost.
    ...chargesOf(d, request),
    key:
      kd !== undefined && request.keyId !== undefined && (kd.chargedRate || kd.chargedDay || kd.chargedMonth || kd.chargedCost || kd.lease)
        ? { keyId: request.keyId, ...chargesOf(kd, request) }
        : null,
  };
  return {
    allowed,
    refusedBy: d.level === 'key' ? (kd?.refusedBy ?? null) : (d.refusedBy ?? null),
    level: d.level ?? null,
    policy,
    key,
    remaining: d.remaining,
    resetMs: d.resetMs,
    burstRemaining: d.burstRemaining,
    burstResetMs: d.burstResetMs,
    tokensRemaining: d.tokensRemaining,
    tokensResetMs: d.tokensResetMs,
    inFlight: d.inFlight,
    retryAfterMs: d.retryAfterMs,
    reservation: allowed && needsSettling(reservation) ? reservation : null,
  };
}
