import { needsSettling, type AdmissionDecision, type AdmissionRequest, type AdmissionSettings, type QuotaStore, type RefusedBy, type Reservation, type Settlement } from '../quota-types.js';
import type { RateLimitPolicy } from '../policy.js';
import type { RedisClient } from './connect.js';
import { ADMIT_SCRIPT, RENEW_SCRIPT, SETTLE_FIELDS, SETTLE_SCRIPT } from './admission-script.js';
import { guard } from './guard.js';
import type { KeyNames } from './key-names.js';

type Scripted = RedisClient & {
  novaAdmit(...args: (string | number)[]): Promise<(string | number)[]>;
  novaSettle(...args: (string | number)[]): Promise<number>;
  novaRenew(...args: (string | number)[]): Promise<number>;
};

const optional = (value: string | number) => (value === '' ? null : Number(value));
/** Most settlements in one script call (each adds SETTLE_FIELDS arguments). */
const MAX_SETTLEMENTS = 256;

/** Admission, settlement and lease renewal of every limit in one round trip each (src/store/redis/admission-script.ts). */
export class RedisQuotaStore implements QuotaStore {
  private readonly redis: Scripted;
  /** Settlements waiting for the end of the event-loop turn, by project. */
  private readonly settling = new Map<string, { args: (string | number)[]; written: Promise<void> }>();

  constructor(
    redis: RedisClient,
    private readonly keys: KeyNames,
  ) {
    redis.defineCommand('novaAdmit', { numberOfKeys: 6, lua: ADMIT_SCRIPT });
    redis.defineCommand('novaSettle', { numberOfKeys: 3, lua: SETTLE_SCRIPT });
    redis.defineCommand('novaRenew', { numberOfKeys: 1, lua: RENEW_SCRIPT });
    this.redis = redis as Scripted;
  }

  async admit(projectId: string, settings: AdmissionSettings, request: AdmissionRequest): Promise<AdmissionDecision> {
    const k = this.keys;
    const reply = await guard(
      this.redis.novaAdmit(
        k.project(projectId),
        k.rateWindow(projectId),
        k.rateBurst(projectId),
        k.rateSubWindows(projectId),
        k.rateLeases(projectId),
        k.budgets(projectId),
        Math.round(settings.windowMs),
        settings.subWindows,
        Math.round(settings.burstWindowMs),
        settings.exactLogMax,
        Math.round(settings.leaseTtlMs),
        settings.defaults.requests_per_minute,
        settings.defaults.burst_limit,
        request.id,
        request.tokens,
        request.cost,
        request.day,
        request.month,
      ),
    );
    const [refused, rpm, burst, tpm, maxc, daily, monthly, cost] = reply;
    const [remaining, resetMs, burstRemaining, burstResetMs, tokensRemaining, tokensResetMs, inFlight, retryAfterMs] = reply.slice(8, 16).map(Number) as number[];
    const [slot, rateTokens, dayTokens, monthTokens, costCharged, lease] = reply.slice(16).map(Number) as number[];
    const policy: RateLimitPolicy = {
      requests_per_minute: Number(rpm),
      burst_limit: Number(burst),
      tokens_per_minute: optional(tpm!),
      max_concurrent_requests: optional(maxc!),
      daily_tokens: optional(daily!),
      monthly_tokens: optional(monthly!),
      monthly_cost: optional(cost!),
    };
    const allowed = refused === '';
    const charged = (value: number) => (value < 0 ? null : value);
    const reservation: Reservation = {
      id: request.id,
      slot: slot!,
      rateTokens: charged(rateTokens!),
      dayTokens: charged(dayTokens!),
      monthTokens: charged(monthTokens!),
      monthCost: costCharged === 1 ? request.cost : null,
      day: request.day,
      month: request.month,
      lease: lease === 1,
    };
    return {
      allowed,
      refusedBy: allowed ? null : (refused as RefusedBy),
      policy,
      remaining: remaining!,
      resetMs: resetMs!,
      burstRemaining: burstRemaining!,
      burstResetMs: burstResetMs!,
      tokensRemaining: tokensRemaining!,
      tokensResetMs: tokensResetMs!,
      inFlight: inFlight!,
      retryAfterMs: retryAfterMs!,
      reservation: allowed && needsSettling(reservation) ? reservation : null,
    };
  }

  /**
   * Settlements are batched: those of one project that end within the same event-loop turn go in
   * one script call (at most MAX_SETTLEMENTS), written once the turn is over. Every caller gets the
   * batch's outcome.
   */
  settle(projectId: string, settings: AdmissionSettings, reservation: Reservation, used: Settlement): Promise<void> {
    let batch = this.settling.get(projectId);
    if (!batch) {
      const args: (string | number)[] = [];
      const written = new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.writeSettlements(projectId, settings, args));
      batch = { args, written };
      this.settling.set(projectId, batch);
    }
    batch.args.push(
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
    if (batch.args.length >= MAX_SETTLEMENTS * SETTLE_FIELDS) this.settling.delete(projectId);
    return batch.written;
  }

  private async writeSettlements(projectId: string, settings: AdmissionSettings, settlements: (string | number)[]): Promise<void> {
    if (this.settling.get(projectId)?.args === settlements) this.settling.delete(projectId);
    const k = this.keys;
    await guard(
      this.redis.novaSettle(
        k.rateSubWindows(projectId),
        k.rateLeases(projectId),
        k.budgets(projectId),
        Math.round(settings.windowMs),
        settings.subWindows,
        ...settlements,
      ),
    );
  }

  async renew(projectId: string, settings: AdmissionSettings, leaseIds: string[]): Promise<void> {
    if (leaseIds.length === 0) return;
    await guard(this.redis.novaRenew(this.keys.rateLeases(projectId), Math.round(settings.leaseTtlMs), ...leaseIds));
  }
}
