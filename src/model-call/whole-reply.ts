import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { upstreamError } from '../http/errors.js';
import type { CallSignal } from './call-signal.js';
import { replyBrokeOff } from './upstream-errors.js';

/** An upstream answer whose body is read whole (see `sendWhole`). */
export interface WholeResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /**
   * The whole body: rejects past the limit or when the upstream breaks off (an ApiError: 502, or
   * 504 for a body timeout), or when the call is cancelled (the signal's reason).
   */
  whole: Promise<Buffer>;
  /** The same bytes as a stream, for a reader that wants one (an error reply's text). */
  body: Readable;
}

/**
 * Dispatches one request and collects its reply's body itself, as it arrives, up to `limit` bytes.
 * undici's `request()` gives every reply a Readable body, whose state, events and buffering cost
 * more than collecting the chunks for a reply that is read whole anyway. The handler uses undici's
 * public dispatch-handler API (`onRequestStart` … `onResponseError`, with a controller), not the
 * `onConnect`/`onHeaders`/`onData` one undici 8 removed. Resolves with the status and headers;
 * the body follows in `whole`.
 */
export function sendWhole(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions, signal: CallSignal, limit: number): Promise<WholeResponse> {
  return new Promise<WholeResponse>((resolve, reject) => {
    dispatcher.dispatch(options, new WholeReplyHandler(signal, limit, resolve, reject));
  });
}

class WholeReplyHandler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private answered = false;
  private settleWhole!: { resolve: (bytes: Buffer) => void; reject: (error: unknown) => void };
  private readonly whole: Promise<Buffer>;
  private readonly onAbort = () => this.controller?.abort(this.signal.reason as Error);

  constructor(
    private readonly signal: CallSignal,
    private readonly limit: number,
    private readonly resolve: (response: WholeResponse) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.whole = new Promise<Buffer>((resolveWhole, rejectWhole) => (this.settleWhole = { resolve: resolveWhole, reject: rejectWhole }));
    // Read or not (a reply its caller gave up on), a failed body is never an unhandled rejection.
    this.whole.catch(() => undefined);
    signal.once('abort', this.onAbort);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.signal.aborted) controller.abort(this.signal.reason as Error);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // An interim reply (102 Processing, 103 Early Hints) is not the answer: the final one follows.
    if (statusCode < 200) return;
    this.answered = true;
    const whole = this.whole;
    this.resolve({
      status: statusCode,
      headers,
      whole,
      get body() {
        return Readable.from(
          (async function* () {
            yield await whole;
          })(),
        );
      },
    });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.limit) {
      controller.abort(upstreamError(`The model backend sent a reply larger than the gateway accepts (${this.limit} bytes).`));
      return;
    }
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    this.signal.off('abort', this.onAbort);
    this.settleWhole.resolve(this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size));
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.signal.off('abort', this.onAbort);
    // A cancelled call fails with the signal's reason (ClientGone), as it is.
    if (this.answered) this.settleWhole.reject(this.signal.aborted ? error : replyBrokeOff(error));
    else this.reject(error);
  }
}
