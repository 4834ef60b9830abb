import { EventEmitter } from 'node:events';

/**
 * Cancels one upstream call: the signal undici's `request` listens to (it takes an EventEmitter
 * as readily as an AbortSignal) and the switch that fires it. An AbortController is an
 * EventTarget whose creation and listener bookkeeping cost about 5 µs a request; this costs
 * an object.
 */
export class CallSignal extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  /** Fires once; the reason is what the upstream call fails with (ClientGone when the client left). */
  abort(reason: unknown = new DOMException('This operation was aborted', 'AbortError')): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}
