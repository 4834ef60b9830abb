import { needsSettling, NO_KEY_LIMITS, type KeyBudgetUsed, type KeyLimits, type KeyReservation, type AdmissionDecision, type AdmissionRequest, type AdmissionSettings, type QuotaStore, type RefusedBy, type Reservation, type Settlement } from '../quota-types.js';
import type { Priority, RateLimitPolicy } from '../types.js';
import type { BudgetCorrection } from '../usage-types.js';
import type { AlertEvent } from '../alert-types.js';
import { createHash } from 'node:crypto';

/** One project's limiter state: the same structures as the Redis script's keys. */
interface ProjectState {
  /** Admission times in the window, oldest first (only while requests_per_minute <= the exact-log maximum). */
  log: number[];
  /** Sub-window counters by absolute sub-window index, their sums and the oldest index held. */
  sub: Map<number, { r: number; t: number }>;
  rs: number;
  ts: number;
  low: number | undefined;
  mode: 'log' | 'sub' | undefined;
  since: number | undefined;
  /** Burst tokens as of `burstAt`; undefined = never drawn (full). */
  burstTokens: number | undefined;
  burstAt: number;
  /** Lease id -> expiry. */
  leases: Map<string, number>;
  /** The periods' charges (dt, mt, mc), what settled of them (ds, ms, cs) and the highest threshold told per budget. */
  budget: { day: string | undefined; dt: number; ds: number; month: string | undefined; mt: number; mc: number; ms: number; cs: number; told: Partial<Record<BudgetName, { period: string; threshold: number }>> };
  touched: number;
}

type BudgetName = 'daily_tokens' | 'monthly_tokens' | 'monthly_cost';

/** Where budget-threshold crossings go: the project's own webhooks' thresholds, and the alert stream. */
export interface CrossingSink {
  thresholdsOf(projectId: string): readonly number[];
  emit(event: AlertEvent): void;
}

const SWEEP_EVERY = 10_000;

/** A key level's state, beside its project's (no project id holds a NUL). */
const keyStateId = (projectId: string, keyId: string) => `${projectId}\u0000key:${keyId}`;
const IDLE_MS = 40 * 86_400_000;

/**
 * The Redis scripts' algorithm (src/store/redis/quota-batch.lua) for one process: the same
 * exact log and sub-window counters, burst allowance, leases and budgets, with the same answers.
 */
export class MemoryQuotaStore implements QuotaStore {
  private readonly states = new Map<string, ProjectState>();
  private decisions = 0;

  constructor(
    private readonly policyOf: (projectId: string) => RateLimitPolicy | undefined,
    private readonly now: () => number = Date.now,
    /** A key's own limits as its record holds them now; undefined: none. */
    private readonly keyLimitsOf: (projectId: string, keyId: string) => KeyLimits | undefined = () => undefined,
    private readonly crossings?: CrossingSink,
    /** The project's queue priority, returned with each decision as quota-batch.lua returns it. */
    private readonly priorityOf: (projectId: string) => Priority | null = () => null,
  ) {}

  async admit(projectId: string, settings: AdmissionSettings, request: AdmissionRequest): Promise<AdmissionDecision> {
    const now = this.now();
    if (++this.decisions % SWEEP_EVERY === 0) this.sweep(now);
    const policy = this.policyOf(projectId) ?? settings.defaults;
    const project = this.level(this.stateOf(projectId, now), settings, now, policy);
    const limits = request.keyId === undefined ? undefined : this.keyLimitsOf(projectId, request.keyId);
    const key = limits === undefined ? undefined : this.level(this.stateOf(keyStateId(projectId, request.keyId!), now), settings, now, limits);
    // Both levels admit it, or nothing is charged at either: the project's checks first.
    const checked = project.check(request);
    const keyChecked = key?.check(request);
    const level = checked.refused !== null ? 'project' : keyChecked && keyChecked.refused !== null ? 'key' : null;
    const reservation: Reservation = {
      id: request.id,
      slot: project.cur,
      rateTokens: null,
      dayTokens: null,
      monthTokens: null,
      monthCost: null,
      day: request.day,
      month: request.month,
      lease: false,
    };
    if (level === null) {
      Object.assign(reservation, project.commit(request, checked));
      if (key && keyChecked) {
        const charged = key.commit(request, keyChecked);
        const keyReservation = { keyId: request.keyId!, ...charged };
        if (keyReservation.lease || charged.rateTokens !== null || charged.dayTokens !== null || charged.monthTokens !== null || charged.monthCost !== null) {
          reservation.key = keyReservation;
        }
      }
    }
    const figures = project.figures(request, checked);
    const keyFigures = key && keyChecked ? key.figures(request, level === 'project' ? { ...keyChecked, refused: null } : keyChecked) : undefined;
    return {
      allowed: level === null,
      refusedBy: level === 'key' ? keyChecked!.refused : checked.refused,
      level,
      policy,
      ...figures,
      retryAfterMs: level === 'key' ? keyFigures!.retryAfterMs : figures.retryAfterMs,
      key: keyFigures ? { policy: limits!, ...keyFigures } : null,
      reservation: level === null && needsSettling(reservation) ? reservation : null,
      priority: this.priorityOf(projectId),
    };
  }

  /**
   * One level's limits against its state: check writes nothing (a refusal at either level costs
   * nothing), commit charges. A key level without a request rate has no burst either.
   */
  private level(s: ProjectState, settings: AdmissionSettings, now: number, policy: KeyLimits) {
    const w = this.window(s, settings, now);
    const { requests_per_minute: rpm, tokens_per_minute: tpm, max_concurrent_requests: maxc } = policy;
    const burst = rpm === null ? 0 : (policy.burst_limit ?? 0);
    const { daily_tokens: daily, monthly_tokens: monthly, monthly_cost: monthlyCost } = policy;
    const budgeted = daily !== null || monthly !== null || monthlyCost !== null;
    const logMode = rpm !== null && rpm <= settings.exactLogMax;
    let burstTokens = s.burstTokens === undefined ? burst : Math.min(burst, s.burstTokens + ((now - s.burstAt) * burst) / settings.burstWindowMs);
    if (rpm !== null) {
      if (logMode) {
        while (s.log.length > 0 && s.log[0]! <= now - settings.windowMs) s.log.shift();
        if (s.mode === 'sub') s.since = now;
        s.mode = 'log';
      } else s.mode = 'sub';
    }
    if (maxc !== null) for (const [id, expiry] of s.leases) if (expiry <= now) s.leases.delete(id);
    interface Checked {
      refused: RefusedBy | null;
      used: number;
      useWindow: boolean;
      inFlight: number;
      dayCurrent: boolean;
      monthCurrent: boolean;
    }
    return {
      cur: w.cur,
      check: (request: AdmissionRequest): Checked => {
        const { tokens: est, rateTokens: rate, cost } = request;
        let refused: RefusedBy | null = null;
        const dayCurrent = s.budget.day !== undefined && s.budget.day >= request.day;
        const monthCurrent = s.budget.month !== undefined && s.budget.month >= request.month;
        const dt = dayCurrent ? s.budget.dt : 0;
        const mt = monthCurrent ? s.budget.mt : 0;
        const mc = monthCurrent ? s.budget.mc : 0;
        if (daily !== null && (dt >= daily || dt + est > daily)) refused = 'daily_tokens';
        else if (monthly !== null && (mt >= monthly || mt + est > monthly)) refused = 'monthly_tokens';
        else if (monthlyCost !== null && (mc >= monthlyCost || mc + cost > monthlyCost)) refused = 'monthly_cost';
        let used = 0;
        let useWindow = true;
        if (rpm !== null) {
          used = logMode ? s.log.length : s.rs;
          if (logMode && s.since !== undefined && now - s.since < settings.windowMs && s.rs > used) used = s.rs;
          useWindow = used < rpm;
          if (!refused && !useWindow && burstTokens < 1) refused = 'requests';
        }
        if (!refused && tpm !== null && s.ts + rate > tpm) refused = 'tokens';
        const inFlight = maxc === null ? 0 : s.leases.size;
        if (!refused && maxc !== null && inFlight >= maxc) refused = 'concurrency';
        return { refused, used, useWindow, inFlight, dayCurrent, monthCurrent };
      },
      commit: (request: AdmissionRequest, c: Checked) => {
        const charged = {
          rateTokens: null as number | null,
          dayTokens: null as number | null,
          monthTokens: null as number | null,
          monthCost: null as number | null,
          day: request.day,
          month: request.month,
          lease: false,
        };
        if (rpm !== null) {
          if (c.useWindow) {
            if (logMode) s.log.push(now);
            w.add('r', 1);
            c.used++;
          } else {
            burstTokens -= 1;
            s.burstTokens = burstTokens;
            s.burstAt = now;
          }
        }
        if (tpm !== null) {
          w.add('t', request.rateTokens);
          charged.rateTokens = request.rateTokens;
        }
        if (maxc !== null) {
          s.leases.set(request.id, now + settings.leaseTtlMs);
          c.inFlight++;
          charged.lease = true;
        }
        if (budgeted) {
          if (!c.dayCurrent) Object.assign(s.budget, { day: request.day, dt: 0, ds: 0 });
          if (!c.monthCurrent) Object.assign(s.budget, { month: request.month, mt: 0, mc: 0, ms: 0, cs: 0 });
          if (daily !== null) s.budget.dt += charged.dayTokens = request.tokens;
          if (monthly !== null) s.budget.mt += charged.monthTokens = request.tokens;
          if (monthlyCost !== null) s.budget.mc += charged.monthCost = request.cost;
          // The periods charged, which may be newer than the request's (another replica's clock):
          // its settlement corrects those.
          charged.day = s.budget.day!;
          charged.month = s.budget.month!;
        }
        return charged;
      },
      figures: (request: AdmissionRequest, c: Checked) => {
        let retryAfterMs = 0;
        const { refused, used } = c;
        if (refused === 'requests') {
          const log = s.log.length === used ? s.log : undefined;
          retryAfterMs = log && logMode ? log[used - rpm!]! + settings.windowMs - now : w.drain('r', s.rs, rpm! - 1);
          if (burst > 0) retryAfterMs = Math.min(retryAfterMs, Math.ceil(((1 - burstTokens) * settings.burstWindowMs) / burst));
        } else if (refused === 'tokens') {
          retryAfterMs = request.rateTokens > tpm! ? settings.windowMs : w.drain('t', s.ts, tpm! - request.rateTokens);
        } else if (refused === 'concurrency') {
          retryAfterMs = 1000;
        }
        let resetMs = 0;
        if (rpm !== null && used > 0) resetMs = logMode && s.log.length > 0 ? s.log.at(-1)! + settings.windowMs - now : w.endMs;
        return {
          remaining: rpm === null ? 0 : Math.max(0, rpm - used),
          resetMs,
          burstRemaining: rpm === null ? 0 : Math.floor(burstTokens + 1e-9),
          burstResetMs: burst > 0 && burstTokens < burst ? Math.ceil(((burst - burstTokens) * settings.burstWindowMs) / burst) : 0,
          tokensRemaining: Math.max(0, (tpm ?? 0) - s.ts),
          tokensResetMs: s.ts > 0 ? w.endMs : 0,
          inFlight: c.inFlight,
          retryAfterMs: Math.max(0, Math.ceil(retryAfterMs)),
        };
      },
    };
  }

  async settle(projectId: string, settings: AdmissionSettings, reservation: Reservation, used: Settlement): Promise<void> {
    const now = this.now();
    const project = this.stateOf(projectId, now);
    if (this.settleOn(project, settings, now, reservation, reservation.slot, used)) {
      this.tellCrossings(projectId, null, project, this.policyOf(projectId) ?? settings.defaults, settings, now);
    }
    const key = reservation.key;
    if (!key) return;
    const keyState = this.stateOf(keyStateId(projectId, key.keyId), now);
    if (this.settleOn(keyState, settings, now, { ...key, id: reservation.id }, reservation.slot, used)) {
      this.tellCrossings(projectId, key.keyId, keyState, this.keyLimitsOf(projectId, key.keyId) ?? NO_KEY_LIMITS, settings, now);
    }
  }

  /** As quota-batch.lua's detectCrossings: each threshold a settled sum passed, told once per period. */
  private tellCrossings(projectId: string, keyId: string | null, s: ProjectState, limits: KeyLimits, settings: AdmissionSettings, now: number): void {
    if (!this.crossings) return;
    const thresholds = [...new Set([...(settings.alertThresholds ?? []), ...this.crossings.thresholdsOf(projectId)])].filter((t) => t > 0).sort((a, b) => a - b);
    const { budget } = s;
    const budgets: Array<[BudgetName, number, string | undefined]> = [
      ['daily_tokens', budget.ds, budget.day],
      ['monthly_tokens', budget.ms, budget.month],
      ['monthly_cost', budget.cs, budget.month],
    ];
    for (const [name, used, period] of budgets) {
      const limit = limits[name];
      if (limit === null || limit <= 0 || period === undefined) continue;
      const told = budget.told[name];
      const high = told?.period === period ? told.threshold : 0;
      let top = high;
      for (const threshold of thresholds) {
        if (threshold <= high || used < threshold * limit * (1 - 1e-12)) continue;
        top = threshold;
        const id = `evt_${createHash('sha1').update([projectId, keyId ?? '', name, period, String(threshold)].join('|')).digest('hex').slice(0, 24)}`;
        const data = { project_id: projectId, api_key_id: keyId, budget: name, period, threshold, used, limit };
        this.crossings.emit({ id, type: 'budget.threshold_crossed', created_at: new Date(now).toISOString(), project_id: projectId, data });
      }
      if (top > high) budget.told[name] = { period, threshold: top };
    }
  }

  private settleOn(
    s: ProjectState,
    settings: AdmissionSettings,
    now: number,
    reservation: Omit<KeyReservation, 'keyId'> & { id: string },
    slot: number,
    used: Settlement,
  ): boolean {
    const w = this.window(s, settings, now);
    if (reservation.rateTokens !== null) {
      let delta = used.tokens - reservation.rateTokens;
      const held = s.sub.get(slot);
      if (held && slot >= s.low!) {
        if (held.t + delta < 0) delta = -held.t;
        held.t += delta;
        s.ts = Math.max(0, s.ts + delta);
      } else if (delta > 0) {
        w.add('t', delta);
      }
    }
    const { budget } = s;
    let settled = false;
    if (reservation.dayTokens !== null && budget.day === reservation.day) {
      Object.assign(budget, { dt: budget.dt + used.tokens - reservation.dayTokens, ds: budget.ds + used.tokens });
      settled = true;
    }
    if (reservation.monthTokens !== null && budget.month === reservation.month) {
      Object.assign(budget, { mt: budget.mt + used.tokens - reservation.monthTokens, ms: budget.ms + used.tokens });
      settled = true;
    }
    if (reservation.monthCost !== null && budget.month === reservation.month) {
      Object.assign(budget, { mc: budget.mc + used.cost - reservation.monthCost, cs: budget.cs + used.cost });
      settled = true;
    }
    if (reservation.lease) s.leases.delete(reservation.id);
    // a budget was settled: its sums may have passed an alert threshold
    return settled;
  }

  /**
   * What the budget counters missed, as src/store/redis/apply-usage.lua adds it (in-process nothing
   * goes unanswered, so there is no settlement to fence off): the stored period, or a newer one it starts.
   */
  correctBudgets(projectId: string, corrections: BudgetCorrection[]): void {
    const now = this.now();
    for (const c of corrections) {
      const { budget } = this.stateOf(c.keyId === undefined ? projectId : keyStateId(projectId, c.keyId), now);
      const { day, month } = c;
      if (c.dayTokens !== 0 || c.settledDayTokens !== 0) {
        if ((budget.day === undefined || budget.day < day) && (c.dayTokens > 0 || c.settledDayTokens > 0)) Object.assign(budget, { day, dt: 0, ds: 0 });
        if (budget.day === day) Object.assign(budget, { dt: budget.dt + c.dayTokens, ds: budget.ds + c.settledDayTokens });
      }
      const monthly = [c.monthTokens, c.monthCost, c.settledMonthTokens, c.settledMonthCost];
      if (monthly.some((v) => v !== 0)) {
        if ((budget.month === undefined || budget.month < month) && monthly.some((v) => v > 0)) Object.assign(budget, { month, mt: 0, mc: 0, ms: 0, cs: 0 });
        if (budget.month === month) {
          Object.assign(budget, { mt: budget.mt + c.monthTokens, mc: budget.mc + c.monthCost, ms: budget.ms + c.settledMonthTokens, cs: budget.cs + c.settledMonthCost });
        }
      }
    }
  }

  async keyBudgetUsage(projectId: string, keyId: string, day: string, month: string): Promise<KeyBudgetUsed> {
    const budget = this.states.get(keyStateId(projectId, keyId))?.budget;
    return {
      dayTokens: budget?.day === day ? budget.dt : 0,
      monthTokens: budget?.month === month ? budget.mt : 0,
      monthCost: budget?.month === month ? budget.mc : 0,
    };
  }

  async renew(projectId: string, settings: AdmissionSettings, leaseIds: string[], keyId?: string): Promise<void> {
    const now = this.now();
    const leases = this.states.get(keyId === undefined ? projectId : keyStateId(projectId, keyId))?.leases;
    for (const id of leaseIds) if (leases?.has(id)) leases.set(id, now + settings.leaseTtlMs);
  }

  private stateOf(projectId: string, now: number): ProjectState {
    let state = this.states.get(projectId);
    if (!state) {
      state = {
        log: [],
        sub: new Map(),
        rs: 0,
        ts: 0,
        low: undefined,
        mode: undefined,
        since: undefined,
        burstTokens: undefined,
        burstAt: now,
        leases: new Map(),
        budget: { day: undefined, dt: 0, ds: 0, month: undefined, mt: 0, mc: 0, ms: 0, cs: 0, told: {} },
        touched: now,
      };
      this.states.set(projectId, state);
    }
    state.touched = now;
    return state;
  }

  /** The sub-window counters brought up to now (what left the window subtracted), and their helpers. */
  private window(s: ProjectState, settings: AdmissionSettings, now: number) {
    const n = settings.subWindows;
    const sub = settings.windowMs / n;
    const cur = Math.floor(now / sub);
    const first = cur - n;
    if (s.low !== undefined && s.low < first) {
      for (const [k, counts] of s.sub) {
        if (k >= first) continue;
        s.rs -= counts.r;
        s.ts -= counts.t;
        s.sub.delete(k);
      }
      s.rs = Math.max(0, s.rs);
      s.ts = Math.max(0, s.ts);
    }
    if (s.low === undefined || s.low < first) s.low = first;
    return {
      cur,
      endMs: Math.ceil((cur + n + 1) * sub - now),
      add: (kind: 'r' | 't', amount: number) => {
        let counts = s.sub.get(cur);
        if (!counts) s.sub.set(cur, (counts = { r: 0, t: 0 }));
        counts[kind] += amount;
        if (kind === 'r') s.rs += amount;
        else s.ts += amount;
      },
      /** ms until the window's count has dropped to at most `target`. */
      drain: (kind: 'r' | 't', total: number, target: number) => {
        let freed = 0;
        for (let k = s.low!; k <= cur; k++) {
          freed += s.sub.get(k)?.[kind] ?? 0;
          if (total - freed <= target) return Math.max(1, Math.ceil((k + n + 1) * sub - now));
        }
        return settings.windowMs;
      },
    };
  }

  forgetProject(projectId: string): void {
    this.states.delete(projectId);
    for (const id of this.states.keys()) if (id.startsWith(keyStateId(projectId, ''))) this.states.delete(id);
  }

  /** Forgets projects idle longer than any window, lease or budget period they could still hold. */
  private sweep(now: number): void {
    for (const [projectId, state] of this.states) if (now - state.touched > IDLE_MS) this.states.delete(projectId);
  }
}
