import type { IncomingHttpHeaders } from 'node:http';
import type { FormData } from 'undici';
import type { Readable } from 'node:stream';
import type { ApiError } from '../http/errors.js';
import type { CallSignal } from './call-signal.js';
import { echoResponse } from './echo-provider.js';
import { upstreamError } from '../http/errors.js';
import { upstreamPath, type HttpTarget, type RegisteredModel, type Target } from './model-registry.js';
import { ClientGone, mapUpstreamFailure, mapUpstreamStatus, shouldFallBack } from './upstream-errors.js';
import { sendWhole } from './whole-reply.js';
import type { UpstreamResponse } from './upstream-response.js';
import type { QueueTicket, TargetLease } from './target-fleet.js';
import type { Span } from '../tracing/tracing.js';

export interface CallOptions {
  requestId: string;
  stream: boolean;
  /** Aborted with a ClientGone reason when the client disconnects. */
  signal: CallSignal;
  /** A reply that is not a stream is read whole, up to this many bytes (`UpstreamResponse.whole`). */
  wholeLimit?: number;
  /** Headers of the client's request the upstream needs (`anthropic-version`, `anthropic-beta`). */
  headers?: Record<string, string>;
}

const ERROR_BODY_LIMIT = 64 * 1024;

/** Reads a body to text, up to `limit` bytes (the rest is discarded). */
export async function readBody(body: Readable, limit = Number.POSITIVE_INFINITY): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    if (size < limit) chunks.push(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Reads a whole reply, failing with a 502 (and closing the upstream connection) past `limit`
 * bytes, so no reply can hold unbounded memory. Listeners, not an async iterator: the iterator's
 * promise per chunk costs more than the read. (A model call's JSON reply is collected without a
 * stream at all: `CallOptions.wholeLimit`, see whole-reply.ts.)
 */
export function readBounded(body: Readable, limit: number): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    // The error listener stays: an error after the end, or from the destroy below, is swallowed.
    const stop = () => {
      settled = true;
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stop();
        body.destroy();
        reject(upstreamError(`The model backend sent a reply larger than the gateway accepts (${limit} bytes).`));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: unknown) => {
      if (settled) return;
      stop();
      reject(mapUpstreamFailure(error));
    };
    // Closed before its end, without an error: the reply was cut short.
    const onClose = () => onError(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    body.on('data', onData);
    body.on('end', onEnd);
    body.on('error', onError);
    body.on('close', onClose);
  });
}

export interface TargetRequest {
  method?: 'GET' | 'POST' | 'DELETE';
  /** Path below the target's base URL, e.g. /chat/completions; may carry its own query string. */
  path: string;
  body?: string | FormData;
  /** Set for a string body; a FormData body brings its own multipart type. */
  contentType?: string;
  accept: string;
}

/** One HTTP request to one backend. Rejects on a network failure or timeout; any HTTP status resolves. */
export async function sendToTarget(target: HttpTarget, request: TargetRequest, options: CallOptions): Promise<UpstreamResponse> {
  const headers: Record<string, string> = { ...options.headers, accept: request.accept, 'x-request-id': options.requestId };
  if (request.contentType) headers['content-type'] = request.contentType;
  if (target.credential) headers[target.credential.name] = target.credential.value;
  const dispatch = {
    method: request.method ?? 'POST',
    path: upstreamPath(target, request.path),
    headers,
    body: request.body,
    headersTimeout: target.timeoutMs,
    bodyTimeout: target.timeoutMs,
  };
  if (options.wholeLimit !== undefined && !options.stream) return sendWhole(target.pool, dispatch, options.signal, options.wholeLimit);
  const response = await target.pool.request({ ...dispatch, signal: options.signal });
  return { status: response.statusCode, headers: response.headers as IncomingHttpHeaders, body: response.body };
}

/** One model request to one target (the echo provider answers chat in process). */
export async function callTarget(
  target: Target,
  path: string,
  publicModel: string,
  body: Record<string, unknown>,
  options: CallOptions,
): Promise<UpstreamResponse> {
  if (target.kind === 'echo') return echoResponse(body, publicModel);
  return sendToTarget(
    target,
    {
      path,
      body: JSON.stringify(body),
      contentType: 'application/json',
      accept: options.stream ? 'text/event-stream' : 'application/json',
    },
    options,
  );
}

export interface Attempt {
  target: Target;
  /** Its place in the model's targets: the equal targets first, then the fallbacks. */
  index: number;
  startedAt: number;
  /** The hold on one of the model's equal targets: released by whoever finishes with the reply. */
  lease?: TargetLease<Target>;
  /** Its client span, when tracing is on (src/model-call/model-call.ts): ended with the attempt. */
  span?: Span;
}

/** A request without a project of its own in the queue's turns (none today: every model call has one). */
const UNQUEUED: QueueTicket = { projectId: '', priority: 'normal' };

export interface FallbackEvents {
  /** A target failed and the next one will be tried. */
  onFallback(failed: Attempt, error: ApiError): void;
  /** A target answered (any status) or failed; for upstream metrics. */
  onAttemptEnd(attempt: Attempt, outcome: string): void;
}

/**
 * Tries the model's targets until one answers 2xx: its equal targets as the fleet picks them (a
 * request may wait there for room, src/model-call/target-fleet.ts), then the fallbacks in order. A
 * failure moves on only while nothing has reached the client and only when another target could
 * help (unreachable, timeout, 5xx, 429); otherwise it is thrown as the mapped ApiError. The answer's
 * attempt holds its fleet lease: the caller releases it when done with the reply.
 */
export async function requestWithFallback(
  model: Pick<RegisteredModel, 'targets' | 'fleet'>,
  send: (target: Target, attempt: Attempt) => Promise<UpstreamResponse>,
  options: Pick<CallOptions, 'signal'>,
  events: FallbackEvents,
  ticket: QueueTicket = UNQUEUED,
): Promise<{ response: UpstreamResponse; attempt: Attempt }> {
  const { targets, fleet } = model;
  const equal = fleet?.size ?? 0;
  const tried = new Set<number>();
  let next = equal;
  let fleetOpen = fleet !== null;
  let lastError: ApiError | undefined;
  for (;;) {
    // The fleet's pick while it has one to give, then the fallbacks in order.
    const lease = fleetOpen ? await fleet!.acquire(ticket, tried, options.signal, targets.length > equal) : null;
    if (lease) tried.add(lease.index);
    else fleetOpen = false;
    const index = lease ? lease.index : next++;
    if (index >= targets.length) break;
    const attempt: Attempt = { target: targets[index]!, index, startedAt: performance.now(), ...(lease ? { lease } : {}) };
    let error: ApiError;
    try {
      const response = await send(attempt.target, attempt);
      if (response.status >= 200 && response.status < 300) return { response, attempt };
      const text = await readBody(response.body, ERROR_BODY_LIMIT).catch(() => '');
      error = mapUpstreamStatus(response.status, response.headers, text);
      lease?.release(response.status >= 500);
      events.onAttemptEnd(attempt, String(response.status));
    } catch (failure) {
      lease?.release(!options.signal.aborted);
      if (options.signal.aborted) throw options.signal.reason instanceof ClientGone ? options.signal.reason : failure;
      error = mapUpstreamFailure(failure);
      events.onAttemptEnd(attempt, error.code);
    }
    lastError = error;
    const more = (fleetOpen && tried.size < equal) || next < targets.length;
    if (!shouldFallBack(error) || !more) break;
    events.onFallback(attempt, error);
  }
  throw lastError!;
}
