import type { OutgoingHttpHeaders } from 'node:http';
import { upstreamError, type ApiError } from '../http/errors.js';
import { SseRelay, type EventTranslator } from './sse-relay.js';
import type { Attempt } from './upstream-call.js';
import type { UpstreamResponse } from './upstream-response.js';
import { mapUpstreamFailure } from './upstream-errors.js';
import type { Metered, ModelCall } from './model-call.js';

/** The last event of a stream the upstream broke off: the OpenAI SDKs raise it as an APIError. */
const openAiErrorEvent = (error: ApiError) => `data: ${JSON.stringify(error.toBody())}\n\n`;

const EVENT_STREAM = /^text\/event-stream\b/i;

export interface StreamOptions {
  /** The client did not ask for usage (chat, completions): the usage chunk is not sent, whatever its shape. */
  hideUsage: boolean;
  /** Sees every event (conversation capture). */
  onEvent?: (event: Buffer) => void;
  /** Runs once when the stream completed in full; returns the bytes it stored. */
  onComplete?: () => number;
  headers?: Record<string, string>;
  /**
   * The last event of a stream the upstream broke off, in the route's API (default OpenAI's). Given,
   * it also ends a stream the upstream ended before its terminal event, which a client of that API
   * would otherwise take as complete.
   */
  errorEvent?: (error: ApiError) => string;
  /** The upstream's events rebuilt in the route's API (src/model-call/sse-relay.ts). */
  translate?: EventTranslator;
}

/**
 * Relays an upstream event stream to the client (SseRelay): target selection and fallback happened
 * before the first byte; after it the events pass through as they arrive and the response ends with
 * them. The relay writes to the response itself (the reply is hijacked after its headers, which
 * keeps the access log and metrics, run when the response ends). The client going away aborts the
 * upstream request; what was delivered by then is metered.
 */
export function relayStream(call: ModelCall, { response, attempt }: { response: UpstreamResponse; attempt: Attempt }, options: StreamOptions): unknown {
  const { ctx, request, reply, model } = call;
  const traffic = ctx.metrics.modelTraffic;
  const labels = { gen_ai_request_model: model.id };
  let upstreamFailure: ApiError | null = null;
  let ended = false;
  // The usage the upstream reported, else why the reservation is charged (src/model-call/model-call.ts).
  const usageOf = (otherwise: 'missing' | 'client_closed'): Metered => relay.usage ?? otherwise;

  const upstream = response.body;
  const breakOff = (failure: ApiError, message: string) => {
    upstreamFailure = failure;
    call.observeUpstream(attempt, failure.code);
    request.log.warn({ model: model.id, upstream: attempt.target.label, error_code: failure.code }, message);
    upstream.destroy();
    relay.endWith((options.errorEvent ?? openAiErrorEvent)(failure));
  };
  const relay: SseRelay = new SseRelay(
    {
      operation: call.operation,
      translate: options.translate,
      onIncompleteEnd: options.errorEvent
        ? () => Buffer.from(options.errorEvent!(upstreamError('The model backend ended the stream before its last event.')))
        : undefined,
      hideUsage: options.hideUsage,
      publicModel: call.answerModel,
      maxEventBytes: ctx.config.upstream.max_sse_event_bytes,
      onEvent: options.onEvent,
      onFirstByte: () => traffic.timeToFirstByte.observe({ ...labels, stream: 'true' }, reply.elapsedTime / 1000),
      onFirstToken: () => traffic.timeToFirstToken.observe(labels, reply.elapsedTime / 1000),
      onOversize: () =>
        breakOff(
          upstreamError(`The model backend sent a stream event larger than the gateway accepts (${ctx.config.upstream.max_sse_event_bytes} bytes).`),
          'upstream stream event too large',
        ),
      beforeEnd: async () => {
        ended = true;
        const complete = upstreamFailure === null && relay.completed;
        const storageBytes = complete && options.onComplete ? options.onComplete() : 0;
        call.finish({ outcome: upstreamFailure?.code ?? (complete ? 'completed' : 'truncated'), usage: usageOf('missing'), storageBytes, attempt, failed: !complete });
      },
    },
    reply.raw,
  );

  upstream.once('end', () => call.observeUpstream(attempt, String(response.status)));
  upstream.once('error', (error) => {
    if (call.signal.aborted || upstreamFailure) return;
    breakOff(mapUpstreamFailure(error), 'upstream stream broke off');
  });
  traffic.activeStreams.inc();
  reply.raw.once('close', () => {
    traffic.activeStreams.dec();
    if (ended) return;
    // The client went away (or the response failed) before the stream ended.
    call.signal.abort();
    upstream.destroy();
    call.finish({ outcome: 'client_closed', usage: usageOf('client_closed'), storageBytes: 0, attempt });
  });

  reply.header('content-type', 'text/event-stream; charset=utf-8');
  reply.header('cache-control', 'no-cache');
  reply.header('x-accel-buffering', 'no');
  if (options.headers) reply.headers(options.headers);
  reply.hijack();
  reply.raw.writeHead(200, reply.getHeaders() as OutgoingHttpHeaders);

  const contentType = String(response.headers['content-type'] ?? '');
  if (EVENT_STREAM.test(contentType)) {
    relay.relayFrom(upstream);
  } else {
    // A stream was asked for and something else came back: say so in the stream's own terms.
    breakOff(upstreamError('The model backend answered a stream request with something other than an event stream.'), 'upstream reply is not an event stream');
  }
  return reply;
}
