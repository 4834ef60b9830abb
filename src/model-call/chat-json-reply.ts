import { envelope } from '../http/envelope.js';
import { upstreamError } from '../http/errors.js';
import { randomBase62, UPSTREAM_ID_PATTERN } from '../core/ids.js';
import { tokensOf } from '../core/operations.js';
import type { ChatMessage } from './upstream-body.js';
import type { Attempt } from './upstream-call.js';
import type { UpstreamResponse } from './upstream-response.js';
import { storeExchange, type ConversationPlan } from './chat-conversation.js';
import type { ChatBody } from './chat-schema.js';
import type { ModelCall } from './model-call.js';
import { readReply } from './json-relay.js';

const VALID_ID = new RegExp(UPSTREAM_ID_PATTERN);

interface UpstreamCompletion {
  id?: unknown;
  created?: unknown;
  choices?: unknown;
  usage?: Record<string, unknown> | null;
  [field: string]: unknown;
}

/** A non-streaming completion: the upstream JSON answer with every field it sent, in the envelope, with the conversation id. */
export async function completeJson(
  call: ModelCall,
  { response, attempt }: { response: UpstreamResponse; attempt: Attempt },
  body: ChatBody,
  plan: ConversationPlan,
): Promise<unknown> {
  const { ctx, request, reply, model } = call;
  const bytes = await readReply(call, response);
  call.observeUpstream(attempt, String(response.status));
  let completion: UpstreamCompletion;
  try {
    completion = JSON.parse(bytes.toString('utf8')) as UpstreamCompletion;
  } catch {
    throw upstreamError('The model backend sent a reply that is not JSON.');
  }
  if (completion === null || typeof completion !== 'object' || !Array.isArray(completion.choices)) {
    throw upstreamError('The model backend sent a reply without choices.');
  }
  const message = (completion.choices[0] as { message?: ChatMessage } | undefined)?.message;
  const replyMessage: ChatMessage = message && typeof message === 'object' ? message : { role: 'assistant', content: '' };
  const storageBytes = storeExchange(ctx, request.log, call.projectId, plan, model.id, body.messages, replyMessage);
  ctx.metrics.modelTraffic.timeToFirstByte.observe({ gen_ai_request_model: model.id, stream: 'false' }, reply.elapsedTime / 1000);
  // What is charged is what the answer reports: the upstream's usage, or the reservation when it sent none it could be charged by.
  const finishReasons = completion.choices.flatMap((choice) => {
    const reason = (choice as { finish_reason?: unknown } | null)?.finish_reason;
    return typeof reason === 'string' ? [reason] : [];
  });
  const charged = call.finish({ outcome: 'completed', usage: tokensOf(completion.usage), storageBytes, attempt, log: { conversation_id: plan.id }, finishReasons });
  const { prompt_tokens: promptTokens, completion_tokens: completionTokens } = charged;
  const id = typeof completion.id === 'string' && VALID_ID.test(completion.id) ? completion.id : `chatcmpl-${randomBase62(24)}`;
  // Set on the envelope itself (one copy of the upstream's fields): a field the upstream sent
  // keeps its place, a new one comes last, as with spreading.
  const answer: Record<string, unknown> = envelope(id, completion);
  answer.created = typeof completion.created === 'number' ? completion.created : Math.floor(ctx.now() / 1000);
  // The name the client sent: an alias (models[].aliases) is answered as itself.
  answer.model = body.model;
  answer.usage = { ...completion.usage, prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
  answer.conversation_id = plan.id;
  // Serialised once, natively: the answer is the upstream's own open-ended object, which the
  // route's response schema (for /openapi.json) would walk field by field to no effect.
  reply.header('content-type', 'application/json; charset=utf-8');
  return reply.send(JSON.stringify(answer));
}
