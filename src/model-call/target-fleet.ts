import { ApiError } from '../http/errors.js';
import { FairQueue, type QueuePriority } from './fair-queue.js';
import type { FastifyRequest } from 'fastify';
import type { CallSignal } from './call-signal.js';
import type { FleetObserver } from '../metrics/model-traffic-metrics.js';

/** How a model's equal targets are chosen, kept healthy and queued for (config `models[]`, DESIGN.md section 10). */
export interface FleetSettings {
  balance: 'least_outstanding' | 'weighted_round_robin';
  ejectAfterFailures: number;
  ejectMs: number;
  /** A path on the target's origin answered 2xx when it is up; null: the next request probes. */
  probe: string | null;
  maxWaitMs: number;
  maxDepth: number;
}


/** Who waits: the project (the unit of fairness) and its priority. */
export interface QueueTicket {
  projectId: string;
  priority: QueuePriority;
}

/** A model request's ticket: its project, and its key's priority, else its project's, else normal. */
export function ticketOf(request: FastifyRequest): QueueTicket {
  const principal = request.principal!;
  return { projectId: principal.projectId, priority: principal.priority ?? request.projectPriority ?? 'normal' };
}

/** What the fleet needs of a target: its host, for logs and metric labels. */
interface Labelled {
  label: string;
}

interface Member<T> {
  target: T;
  /** Its place in the model's targets (the fleet's come first). */
  index: number;
  weight: number;
  maxConcurrent: number | null;
  inFlight: number;
  failures: number;
  /** Ejected until then (ms, performance clock); 0: in service. */
  ejectedUntil: number;
  /** Out of ejection without a probe path: one request at a time tells whether it is back. */
  trial: boolean;
  /** A probe is scheduled or running. */
  probing: boolean;
  /** Smooth weighted round robin's running score. */
  score: number;
  /** Sets its in-flight gauge. */
  showInFlight: (count: number) => void;
}

/** One attempt's hold on a target: released once, when the request is done with it. */
export interface TargetLease<T = unknown> {
  target: T;
  index: number;
  /** `failed`: a connection error, timeout or 5xx (counts toward ejection); false: it answered. */
  release(failed: boolean): void;
}

interface Waiter<T> {
  ticket: QueueTicket;
  resolve: (lease: TargetLease<T>) => void;
  reject: (error: unknown) => void;
  timer: NodeJS.Timeout;
  since: number;
  settled: boolean;
}

const NOT_SHOWN = () => undefined;

export const upstreamBusy = (retryAfterSeconds: number, message: string) =>
  new ApiError(429, 'rate_limit_error', 'upstream_busy', message, undefined, { 'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))) });

/**
 * A model's equal targets on this replica: balancing (least outstanding, or smooth weighted round
 * robin), passive health (ejection after consecutive failures, then a probe) and each target's
 * `max_concurrent`. When every target in service is full, a request waits in the model's fair queue
 * (src/model-call/fair-queue.ts) and takes the first slot freed for it.
 */
export class TargetFleet<T extends Labelled> {
  private readonly members: Member<T>[];
  private readonly queue = new FairQueue<Waiter<T>>();
  private closed = false;
  private readonly showDepth: (depth: number) => void;
  private readonly showWait: (seconds: number) => void;
  /** Where ties start, so equal targets take turns. */
  private rotation = 0;

  constructor(
    private readonly model: string,
    targets: Array<{ target: T; weight: number; maxConcurrent: number | null }>,
    private readonly settings: FleetSettings,
    private readonly observer: FleetObserver | null,
    private readonly probe: (target: T, path: string) => Promise<boolean>,
  ) {
    this.members = targets.map(({ target, weight, maxConcurrent }, index) => ({
      target, index, weight, maxConcurrent, inFlight: 0, failures: 0, ejectedUntil: 0, trial: false, probing: false, score: 0,
      showInFlight: observer?.inFlight(model, target.label) ?? NOT_SHOWN,
    }));
    this.showDepth = observer?.queueDepth(model) ?? NOT_SHOWN;
    this.showWait = observer?.queueWait(model) ?? NOT_SHOWN;
  }

  get size(): number {
    return this.members.length;
  }

  /**
   * A target for a request's attempt, leaving out those it `tried`: at once when one in service has
   * room; else, on a first attempt, after a wait in the queue; null when none is left to try.
   */
  async acquire(ticket: QueueTicket, tried: ReadonlySet<number>, signal: CallSignal, hasFallbacks: boolean): Promise<TargetLease<T> | null> {
    const now = performance.now();
    const chosen = this.choose(tried, now);
    if (chosen) return this.lease(chosen);
    const untried = this.members.filter((member) => !tried.has(member.index));
    if (untried.length === 0) return null;
    const inService = untried.filter((member) => this.inService(member, now));
    if (inService.length === 0) {
      // Every untried target is ejected: the fallbacks are next, or else the one back soonest is
      // tried rather than failing the request unasked.
      if (hasFallbacks) return null;
      return this.lease(untried.reduce((a, b) => (b.ejectedUntil < a.ejectedUntil ? b : a)));
    }
    // Full: a retry after a failure does not queue (the fallbacks are next); a first attempt waits.
    if (tried.size > 0) return null;
    return this.wait(ticket, signal);
  }

  private inService(member: Member<T>, now: number): boolean {
    if (member.ejectedUntil === 0) return true;
    if (member.ejectedUntil > now || this.settings.probe !== null) return false;
    // Ejection over, no probe path: one request at a time finds out whether it is back.
    return !member.trial;
  }

  private hasRoom(member: Member<T>): boolean {
    return member.maxConcurrent === null || member.inFlight < member.maxConcurrent;
  }

  private choose(tried: ReadonlySet<number>, now: number): Member<T> | null {
    const { members } = this;
    let best: Member<T> | null = null;
    let total = 0;
    for (let i = 0; i < members.length; i++) {
      const member = members[(this.rotation + i) % members.length]!;
      if (tried.has(member.index) || !this.inService(member, now) || !this.hasRoom(member)) continue;
      if (this.settings.balance === 'weighted_round_robin') {
        member.score += member.weight;
        total += member.weight;
        if (best === null || member.score > best.score) best = member;
      } else if (best === null || member.inFlight * best.weight < best.inFlight * member.weight) {
        best = member;
      }
    }
    if (best === null) return null;
    if (this.settings.balance === 'weighted_round_robin') best.score -= total;
    this.rotation = (this.rotation + 1) % members.length;
    if (best.ejectedUntil !== 0) best.trial = true;
    return best;
  }

  private lease(member: Member<T>): TargetLease<T> {
    member.inFlight++;
    member.showInFlight(member.inFlight);
    // Sent to a target out of service: its outcome says whether the target is back.
    const trial = member.ejectedUntil !== 0;
    let released = false;
    return {
      target: member.target,
      index: member.index,
      release: (failed) => {
        if (released) return;
        released = true;
        member.inFlight--;
        member.showInFlight(member.inFlight);
        this.recordOutcome(member, failed, trial);
        this.serveQueue();
      },
    };
  }

  /**
   * A request's outcome on a target. In service: a success clears its failures, `ejectAfterFailures`
   * in a row eject it. Out of service: only a trial's outcome counts (a request sent before the
   * ejection tells nothing of now): back on success, ejected again on failure.
   */
  private recordOutcome(member: Member<T>, failed: boolean, trial: boolean): void {
    if (member.ejectedUntil !== 0) {
      if (!trial) return;
      member.trial = false;
      if (failed) this.eject(member);
      else this.restore(member);
      return;
    }
    if (!failed) member.failures = 0;
    else if (++member.failures >= this.settings.ejectAfterFailures) this.eject(member);
  }

  private restore(member: Member<T>): void {
    member.failures = 0;
    member.ejectedUntil = 0;
    member.trial = false;
  }

  private eject(member: Member<T>): void {
    if (member.ejectedUntil === 0) this.observer?.ejected(this.model, member.target.label);
    member.ejectedUntil = performance.now() + this.settings.ejectMs;
    const path = this.settings.probe;
    if (path === null || member.probing || this.closed) return;
    // The probe decides when it is back: every ejectMs until it answers 2xx.
    member.probing = true;
    setTimeout(() => {
      void this.probe(member.target, path)
        .catch(() => false)
        .then((up) => {
          member.probing = false;
          if (this.closed || member.ejectedUntil === 0) return;
          if (!up) return this.eject(member);
          this.restore(member);
          this.serveQueue();
        });
    }, this.settings.ejectMs).unref();
  }

  /** Stops probing (the registry is closing). */
  close(): void {
    this.closed = true;
  }

  private wait(ticket: QueueTicket, signal: CallSignal): Promise<TargetLease<T>> {
    const { maxDepth, maxWaitMs } = this.settings;
    if (this.queue.size >= maxDepth) {
      return Promise.reject(upstreamBusy(1, `The model "${this.model}" is busy: ${maxDepth} requests are waiting for it on this gateway; retry later.`));
    }
    return new Promise<TargetLease<T>>((resolve, reject) => {
      const waiter: Waiter<T> = {
        ticket,
        resolve,
        reject,
        since: performance.now(),
        settled: false,
        timer: setTimeout(() => {
          this.leave(waiter);
          reject(upstreamBusy(maxWaitMs / 1000, `The model "${this.model}" stayed busy for ${maxWaitMs} ms (queue.max_wait_ms); retry later.`));
        }, maxWaitMs),
      };
      // A client that leaves frees its place at once.
      if (signal.aborted) {
        waiter.settled = true;
        clearTimeout(waiter.timer);
        reject(signal.reason);
        return;
      }
      signal.once('abort', () => {
        if (this.leave(waiter)) reject(signal.reason);
      });
      this.queue.push(ticket.projectId, ticket.priority, waiter);
      this.showDepth(this.queue.size);
    });
  }

  /** Takes a waiter out of the queue; false when it was served or had left already. */
  private leave(waiter: Waiter<T>): boolean {
    if (waiter.settled) return false;
    waiter.settled = true;
    clearTimeout(waiter.timer);
    this.queue.remove(waiter.ticket.projectId, waiter.ticket.priority, waiter);
    this.showDepth(this.queue.size);
    return true;
  }

  /** Hands freed room to waiting requests, in the queue's fair order. */
  private serveQueue(): void {
    while (this.queue.size > 0) {
      const member = this.choose(new Set(), performance.now());
      if (!member) return;
      const waiter = this.queue.shift()!;
      waiter.settled = true;
      clearTimeout(waiter.timer);
      this.showDepth(this.queue.size);
      this.showWait((performance.now() - waiter.since) / 1000);
      waiter.resolve(this.lease(member));
    }
  }
}
