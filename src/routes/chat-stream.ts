import type { ApiError } from '../http/errors.js';
import { estimatePromptTokens, upstreamBody } from '../upstream/chat-body.js';
import { SseRelay } from '../upstream/sse-relay.js';
import { callTarget, requestWithFallback } from '../upstream/upstream-call.js';
import { mapUpstreamFailure } from '../upstream/upstream-errors.js';
import type { ChatCall } from './chat-call.js';
import { storeExchange } from './chat-conversation.js';

/** The last event of a stream the upstream broke off: the OpenAI SDKs raise it as an APIError. */
const errorEvent = (error: ApiError) => `data: ${JSON.stringify(error.toBody())}\n\n`;

/**
 * A streaming completion. Target selection and fallback happen before the first byte; after that
 * the upstream's events pass through as they arrive (SseRelay) and the response ends with them.
 * The client going away aborts the upstream request; what was delivered by then is metered.
 */
export async function completeStream(call: ChatCall): Promise<unknown> {
  const { ctx, request, reply, body, plan, model } = call;
  const traffic = ctx.metrics.modelTraffic;
  const labels = { gen_ai_request_model: model.id };
  const options = { requestId: request.id, stream: true, signal: call.controller.signal };
  const { response, attempt } = await requestWithFallback(
    model,
    (target) => callTarget(target, model.id, upstreamBody(body, call.upstreamModelOf(target), plan.history), options),
    options,
    call.fallbackEvents,
  );

  let upstreamFailure: ApiError | null = null;
  let ended = false;
  const usageOf = () => ({
    promptTokens: relay.usage?.prompt_tokens ?? estimatePromptTokens([...plan.history, ...body.messages]),
    completionTokens: relay.usage?.completion_tokens ?? relay.contentEvents,
  });

  const relay: SseRelay = new SseRelay({
    hideUsageChunk: body.stream_options?.include_usage !== true,
    captureContent: plan.store && plan.id !== null,
    onFirstByte: () => traffic.timeToFirstByte.observe({ ...labels, stream: 'true' }, reply.elapsedTime / 1000),
    onFirstToken: () => traffic.timeToFirstToken.observe(labels, reply.elapsedTime / 1000),
    beforeEnd: async () => {
      ended = true;
      const complete = upstreamFailure === null && relay.sawDone;
      const storageBytes = complete ? storeExchange(ctx, request.log, call.projectId, plan, model.id, body.messages, relay.content) : 0;
      call.finish({ outcome: upstreamFailure?.code ?? (complete ? 'completed' : 'truncated'), ...usageOf(), storageBytes, attempt });
    },
  });

  const upstream = response.body;
  upstream.once('end', () => call.observeUpstream(attempt, String(response.status)));
  upstream.once('error', (error) => {
    if (call.controller.signal.aborted) return;
    upstreamFailure = mapUpstreamFailure(error);
    call.observeUpstream(attempt, upstreamFailure.code);
    request.log.warn({ model: model.id, upstream: attempt.target.label, error_code: upstreamFailure.code }, 'upstream stream broke off');
    relay.endWith(errorEvent(upstreamFailure));
  });
  traffic.activeStreams.inc();
  relay.once('close', () => {
    traffic.activeStreams.dec();
    if (ended) return;
    // The client went away (or the response failed) before the stream ended.
    call.controller.abort();
    upstream.destroy();
    call.finish({ outcome: 'client_closed', ...usageOf(), storageBytes: 0, attempt });
  });
  upstream.pipe(relay);

  reply.header('content-type', 'text/event-stream; charset=utf-8');
  reply.header('cache-control', 'no-cache');
  reply.header('x-accel-buffering', 'no');
  if (plan.id !== null) reply.header('x-conversation-id', plan.id);
  return reply.send(relay);
}
