import type { Reservation } from '../store/quota-types.js';
import type { Charge } from './request-charge.js';
import { reservedCostOf } from '../core/pricing.js';
import { USAGE_CAPS, withinCap } from './usage-validation.js';

/** How long a response that ended may wait for its route to report usage before the reservation is settled as charged. */
const OWNED_GRACE_MS = 30_000;

export interface Settler {
  settle(projectId: string, reservation: Reservation, used: { tokens: number; cost: number }, reserved: number): void;
}

/** A reservation a follower owns past its response's end: only this settles it (once). */
export interface FollowedReservation {
  settle(promptTokens: number, completionTokens: number, cost?: number): void;
}

/**
 * What one admitted model request holds (token charge, budget charges, concurrency lease), settled
 * exactly once, and never before its response has been written or its client dropped: a reply a
 * client does not read still holds memory, so it keeps its concurrency slot (DESIGN.md section 7,
 * "Bounded before authenticated"). Its life, one state at a time:
 * - `held`: admitted (src/routes/admission-hook.ts); nothing has claimed it yet.
 * - `metering`: a model call claimed it (src/model-call/model-call.ts) and settles it with the
 *   upstream's usage when it finishes.
 * - `used`: the model call reported its usage while the response was still being written; the
 *   store is told when the response ends (its lease is released then, not before).
 * - `awaiting_usage`: the response ended while metering; the model call still reports its usage
 *   (an abort is reported right after it); if it never does, the charge stands as reserved.
 * - `followed`: a follower (src/model-call/background-response.ts) owns it past the response's
 *   end: the model call's settlement and the response's end leave it alone, the concurrency lease
 *   stays held (and renewed, src/quota/admission.ts) until the follower settles it.
 * - `settled`: the store was told; nothing more happens. A held reservation whose response ends
 *   is settled as nothing used (no model call ran: a refused body, a failed validation).
 */
export class QuotaReservation {
  private state: 'held' | 'metering' | 'used' | 'awaiting_usage' | 'followed' | 'settled' = 'held';
  /** The usage reported in `used`, settled when the response ends. */
  private used: [promptTokens: number, completionTokens: number, cost: number | undefined] | null = null;

  constructor(
    private readonly settler: Settler,
    readonly projectId: string,
    readonly reservation: Reservation,
    readonly charge: Charge,
  ) {}

  claim(): void {
    if (this.state === 'held') this.state = 'metering';
  }

  /**
   * `cost`: what the target that served it charges (default: as the reservation was costed, at the
   * model's price). The numbers come from the upstream's usage: each is charged as the usage record
   * takes it (validUsage), a value out of range as 0, so that no upstream can make a settlement fail,
   * wrap a counter or drain a budget.
   */
  settle(promptTokens: number, completionTokens: number, cost?: number): void {
    if (this.state === 'held' || this.state === 'metering') {
      this.state = 'used';
      this.used = [promptTokens, completionTokens, cost];
    } else if (this.state === 'awaiting_usage') this.settleNow(promptTokens, completionTokens, cost);
  }

  /**
   * Hands the reservation to a follower, which alone settles it from now on, however long after
   * the response it comes; null when it was settled already.
   */
  follow(): FollowedReservation | null {
    if (this.state === 'settled' || this.state === 'followed' || this.state === 'used') return null;
    this.state = 'followed';
    return { settle: (prompt, completion, cost) => this.settleNow(prompt, completion, cost) };
  }

  private settleNow(promptTokens: number, completionTokens: number, cost?: number): void {
    if (this.state === 'settled') return;
    this.state = 'settled';
    const prompt = withinCap(promptTokens, USAGE_CAPS.promptTokens, true);
    const completion = withinCap(completionTokens, USAGE_CAPS.completionTokens, true);
    // No cost: a reservation charged as reserved (or nothing), costed as admission costed it.
    const charged = cost === undefined ? reservedCostOf(this.charge.pricing, prompt, completion) : withinCap(cost, USAGE_CAPS.cost, false);
    this.settler.settle(this.projectId, this.reservation, { tokens: prompt + completion, cost: charged }, this.charge.tokens);
  }

  /** The response ended (written, aborted or failed; its client dropped): settle what it holds. */
  responseClosed(): void {
    if (this.state === 'held') this.settleNow(0, 0);
    else if (this.state === 'used') this.settleNow(...this.used!);
    else if (this.state === 'metering') {
      this.state = 'awaiting_usage';
      setTimeout(() => this.settle(this.charge.promptTokens, this.charge.tokens - this.charge.promptTokens), OWNED_GRACE_MS).unref();
    }
  }
}
