import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ModelCallContext } from './model-call-context.js';
import { modelNotFound, upstreamError } from '../http/errors.js';
import { costOf } from '../core/pricing.js';
import type { RegisteredModel, Target } from './model-registry.js';
import { ticketOf } from './target-fleet.js';
import { readBounded, requestWithFallback, sendToTarget, type Attempt, type TargetRequest } from './upstream-call.js';
import type { UpstreamResponse } from './upstream-response.js';
import { CallSignal } from './call-signal.js';
import { ClientGone, replyBrokeOff } from './upstream-errors.js';
import { modelCallFactsOf } from './route-facts.js';

const JSON_REPLY_LIMIT = 16 * 1024 * 1024;

/**
 * Sends a creation request (fine-tuning job, transcription, image, speech) to the model's
 * targets in order, like chat: fallbacks while nothing reached the client, the client's
 * disconnect cancels it, upstream failures map to the error table.
 */
export async function callResource(
  ctx: ModelCallContext,
  request: FastifyRequest,
  reply: FastifyReply,
  model: RegisteredModel,
  requestFor: (upstreamModel: string) => TargetRequest,
): Promise<UpstreamResponse & { target: Target }> {
  modelCallFactsOf(request);
  const signal = new CallSignal();
  reply.raw.once('close', () => {
    if (!reply.raw.writableEnded) signal.abort(new ClientGone());
  });
  const traffic = ctx.metrics.modelTraffic;
  const options = { requestId: request.id, stream: false, signal };
  const send = (target: Target) => {
    // Config validation keeps the echo provider to chat.
    if (target.kind !== 'http') throw modelNotFound();
    return sendToTarget(target, requestFor(target.upstreamModel), options);
  };
  const events = {
    onFallback: (failed: Attempt) => traffic.fallbacks.inc({ gen_ai_request_model: model.id, from_upstream: failed.target.label }),
    onAttemptEnd: (done: Attempt, outcome: string) =>
      traffic.upstreamDuration.observe({ gen_ai_request_model: model.id, upstream: done.target.label, outcome }, (performance.now() - done.startedAt) / 1000),
  };
  const { response, attempt } = await requestWithFallback(model, send, options, events, ticketOf(request));
  // The target's slot is held until its reply is read or dropped.
  const lease = attempt.lease;
  if (lease) response.body.once('close', () => lease.release(false));
  traffic.upstreamDuration.observe(
    { gen_ai_request_model: model.id, upstream: attempt.target.label, outcome: String(response.status) },
    (performance.now() - attempt.startedAt) / 1000,
  );
  // The target that served it: its pricing prices the request.
  return { ...response, target: attempt.target };
}

/** The token counts an upstream reported in a resource reply (`usage`, either naming), unchecked: the meter validates them. */
export function reportedTokens(reply: Record<string, unknown>): { promptTokens?: number; completionTokens?: number } {
  const usage = reply.usage;
  if (usage === null || typeof usage !== 'object') return {};
  const { input_tokens: input, output_tokens: output, prompt_tokens: prompt, completion_tokens: completion } = usage as Record<string, unknown>;
  const tokens = (value: unknown) => (typeof value === 'number' ? value : undefined);
  return { promptTokens: tokens(input ?? prompt), completionTokens: tokens(output ?? completion) };
}

/** What a resource reply cost at the target that served it, with its reported tokens. */
export function resourceUsage(reply: Record<string, unknown>, target: Target) {
  const tokens = reportedTokens(reply);
  return { ...tokens, cost: costOf(target.pricing, { prompt_tokens: tokens.promptTokens ?? 0, completion_tokens: tokens.completionTokens ?? 0 }) };
}

/** The whole upstream reply as bytes (speech audio, transcripts), bounded; one cut short is a 502, as on the chat path (whole-reply.ts). */
export function readReplyBytes(response: UpstreamResponse, limit = JSON_REPLY_LIMIT): Promise<Buffer> {
  return readBounded(response.body, limit).catch((error: unknown) => {
    throw replyBrokeOff(error);
  });
}

/** The upstream's JSON object reply, or a 502 when it is something else. */
export async function readReplyJson(response: UpstreamResponse): Promise<Record<string, unknown>> {
  const bytes = await readReplyBytes(response);
  try {
    const parsed: unknown = JSON.parse(bytes.toString('utf8'));
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw upstreamError('The model backend sent a reply that is not a JSON object.');
}

/** An upstream object without the fields the envelope owns. */
export function withoutEnvelopeFields(value: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, object: _object, status: _status, ...rest } = value;
  return rest;
}
