import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ModelCallContext } from './model-call-context.js';
import type { Target } from './model-registry.js';
import { tokenOperationOf } from '../core/operations.js';
import { modelCallFactsOf } from './route-facts.js';
import { upstreamBody } from './upstream-body.js';
import type { Attempt } from './upstream-call.js';
import { ModelCall } from './model-call.js';
import { relayJson } from './json-relay.js';
import { relayStream } from './stream-relay.js';

/** What the gateway reads of an OpenAI model request (completions, embeddings, responses); the rest rides along. */
export interface ModelRequestBody {
  model: string;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  [field: string]: unknown;
}

export interface ProxyHooks {
  /** Only these targets, in this order (a stateful continuation must reach the target that holds its state). */
  targets?: { targets: Target[]; indexOf: (attempt: Attempt) => number };
  /** Sees the JSON reply before it is sent. */
  onReply?: (bytes: Buffer, targetIndex: number) => Promise<void>;
  /** Sees every stream event. */
  onEvent?: (event: Buffer, targetIndex: number) => void;
}

/**
 * An OpenAI model route in OpenAI's own shape: the request as the client wrote it (model name
 * swapped for the target's), the answer as the upstream sent it (model name swapped back), with
 * the same auth, admission, usage, metrics, timeouts and fallbacks as chat.
 */
export async function proxyModelRequest(
  ctx: ModelCallContext,
  request: FastifyRequest,
  reply: FastifyReply,
  projectId: string,
  hooks: ProxyHooks = {},
): Promise<never> {
  const operation = tokenOperationOf(modelCallFactsOf(request).work);
  if (operation === undefined) throw new Error(`route ${request.routeOptions.url} is not a token operation`);
  const body = request.body as ModelRequestBody;
  const model = ctx.models.serving(body.model, operation.endpoint);
  const call = new ModelCall(ctx, request, reply, projectId, model, operation, operation.streams && body.stream === true);
  return call.run(async () => {
    const sent = await call.send(
      (upstreamModel) => upstreamBody(body, upstreamModel, { askStreamUsage: operation.asksStreamUsage }),
      hooks.targets?.targets,
    );
    const targetIndex = hooks.targets ? hooks.targets.indexOf(sent.attempt) : sent.attempt.index;
    const { onReply, onEvent } = hooks;
    if (!call.stream) {
      return relayJson(call, sent, { onReply: onReply && ((bytes) => onReply(bytes, targetIndex)) });
    }
    return relayStream(call, sent, {
      hideUsage: operation.asksStreamUsage && body.stream_options?.include_usage !== true,
      onEvent: onEvent && ((event) => onEvent(event, targetIndex)),
    });
  });
}
