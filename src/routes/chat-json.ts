import { envelope } from '../http/envelope.js';
import { ApiError, upstreamError } from '../http/errors.js';
import { randomBase62, UPSTREAM_ID_PATTERN } from '../http/ids.js';
import { estimatePromptTokens, estimateTokens, textOf, upstreamBody } from '../upstream/chat-body.js';
import { callTarget, readBody, requestWithFallback } from '../upstream/upstream-call.js';
import { ClientGone, mapUpstreamFailure } from '../upstream/upstream-errors.js';
import type { ChatCall } from './chat-call.js';
import { storeExchange } from './chat-conversation.js';

const VALID_ID = new RegExp(UPSTREAM_ID_PATTERN);
const BODY_LIMIT = 64 * 1024 * 1024;

interface UpstreamCompletion {
  id?: unknown;
  created?: unknown;
  choices?: unknown;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
  [field: string]: unknown;
}

/** A non-streaming completion: the upstream JSON answer, in the envelope, with the conversation id. */
export async function completeJson(call: ChatCall): Promise<unknown> {
  const { ctx, request, reply, body, plan, model } = call;
  const options = { requestId: request.id, stream: false, signal: call.controller.signal };
  const result = await requestWithFallback(
    model,
    (target) => callTarget(target, model.id, upstreamBody(body, call.upstreamModelOf(target), plan.history), options),
    options,
    call.fallbackEvents,
  );
  const attempt = result.attempt;
  const text = await readBody(result.response.body, BODY_LIMIT).catch((error: unknown) => {
    throw call.controller.signal.aborted ? error : mapUpstreamFailure(error);
  });
  call.observeUpstream(attempt, String(result.response.status));
  let completion: UpstreamCompletion;
  try {
    completion = JSON.parse(text) as UpstreamCompletion;
  } catch {
    throw upstreamError('The model backend sent a reply that is not JSON.');
  }
  if (!Array.isArray(completion.choices)) throw upstreamError('The model backend sent a reply without choices.');
  const replyText = textOf((completion.choices[0] as { message?: { content?: unknown } } | undefined)?.message?.content);
  const usage = tokenUsage(completion, () => estimatePromptTokens([...plan.history, ...body.messages]), replyText);
  const storageBytes = storeExchange(ctx, request.log, call.projectId, plan, model.id, body.messages, replyText);
  ctx.metrics.modelTraffic.timeToFirstByte.observe({ gen_ai_request_model: model.id, stream: 'false' }, reply.elapsedTime / 1000);
  call.finish({ outcome: 'completed', ...usage, storageBytes, attempt });
  const id = typeof completion.id === 'string' && VALID_ID.test(completion.id) ? completion.id : `chatcmpl-${randomBase62(24)}`;
  return envelope(id, {
    ...completion,
    created: typeof completion.created === 'number' ? completion.created : Math.floor(ctx.now() / 1000),
    model: model.id,
    usage: {
      prompt_tokens: usage.promptTokens,
      completion_tokens: usage.completionTokens,
      total_tokens: usage.promptTokens + usage.completionTokens,
    },
    conversation_id: storageBytes > 0 || (plan.existing && !plan.store) ? plan.id : null,
  });
}

function tokenUsage(completion: UpstreamCompletion, estimatePrompt: () => number, replyText: string) {
  const usage = completion.usage;
  const prompt = Number(usage?.prompt_tokens);
  const completionTokens = Number(usage?.completion_tokens);
  return {
    promptTokens: Number.isFinite(prompt) && prompt >= 0 ? prompt : estimatePrompt(),
    completionTokens: Number.isFinite(completionTokens) && completionTokens >= 0 ? completionTokens : estimateTokens(replyText),
  };
}

export function outcomeOf(error: unknown): string {
  if (error instanceof ClientGone) return 'client_closed';
  if (error instanceof ApiError) return error.code;
  return 'internal_error';
}
