import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import { anthropicErrorEvent } from '../http/anthropic-errors.js';
import { upstreamError, type ApiError } from '../http/errors.js';
import { estimatePromptTokens, OPERATIONS, type ReportedUsage } from '../core/operations.js';
import type { ModelCallContext } from './model-call-context.js';
import { ModelCall } from './model-call.js';
import { upstreamBody } from './upstream-body.js';
import { readReply, relayJson } from './json-relay.js';
import { relayStream } from './stream-relay.js';
import { parseEventData, type EventTranslator } from './sse-relay.js';
import type { Attempt } from './upstream-call.js';
import type { UpstreamResponse } from './upstream-response.js';
import { chatRequestOf } from './anthropic/chat-request.js';
import { messagesReplyOf } from './anthropic/messages-reply.js';
import { MessagesStream } from './anthropic/messages-stream.js';

/** What the gateway reads of a Messages request; everything else reaches a native upstream as written. */
export interface MessagesBody {
  model: string;
  max_tokens: number;
  messages: unknown[];
  stream?: boolean | null;
  [field: string]: unknown;
}

/** Headers of the client's request an Anthropic upstream reads; the API version is required, so one is sent. */
const PASSED_HEADERS = ['anthropic-version', 'anthropic-beta'] as const;
const DEFAULT_VERSION = '2023-06-01';

function anthropicHeadersOf(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = { 'anthropic-version': DEFAULT_VERSION };
  for (const name of PASSED_HEADERS) {
    const value = headers[name];
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(',') : value;
  }
  return out;
}

/** The request's query string (`?beta=true`), passed on to a native upstream. */
const queryOf = (url: string) => {
  const at = url.indexOf('?');
  return at === -1 ? '' : url.slice(at);
};

/**
 * `POST /v1/messages`, top to bottom. A model whose upstream speaks Anthropic's API (`api:
 * anthropic`) gets the request as written, like the OpenAI routes; any other is sent the request
 * translated to chat completions (src/model-call/anthropic/), and its answer, JSON or stream, is
 * rebuilt in Anthropic's shape. Both are one model call: same admission, usage, metrics, fallbacks.
 */
export async function callMessages(ctx: ModelCallContext, request: FastifyRequest, reply: FastifyReply, projectId: string): Promise<never> {
  const body = request.body as MessagesBody;
  const model = ctx.models.serving(body.model, 'messages');
  const call = new ModelCall(ctx, request, reply, projectId, model, OPERATIONS.messages, body.stream === true);
  const errorEvent = (error: ApiError) => anthropicErrorEvent(error, request.id);
  if (model.api === 'anthropic') {
    return call.run(async () => {
      const upstream = { path: `${OPERATIONS.messages.path}${queryOf(request.url)}`, headers: anthropicHeadersOf(request.headers) };
      const sent = await call.send((upstreamModel) => upstreamBody(body, upstreamModel), undefined, upstream);
      return call.stream ? relayStream(call, sent, { hideUsage: false, errorEvent }) : relayJson(call, sent);
    });
  }
  return call.run(async () => {
    // Translated once, before any upstream is called: content it cannot carry is a 400 that costs nothing.
    const chat = chatRequestOf(body, model.id);
    const sent = await call.send((upstreamModel) => ({ ...chat, model: upstreamModel }), undefined, { path: OPERATIONS.chat.path });
    if (!call.stream) return translateJson(call, sent, body.model);
    return relayStream(call, sent, { hideUsage: false, errorEvent, translate: new ChatAsMessagesEvents(new MessagesStream(body.model)) });
  });
}

/** A chat completion answered as a Message. */
async function translateJson(call: ModelCall, { response, attempt }: { response: UpstreamResponse; attempt: Attempt }, publicModel: string): Promise<unknown> {
  const bytes = await readReply(call, response);
  call.observeUpstream(attempt, String(response.status));
  let chat: unknown;
  try {
    chat = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw upstreamError('The model backend sent a reply that is not JSON.');
  }
  const { reply: message, usage } = messagesReplyOf(chat, publicModel);
  call.ctx.metrics.modelTraffic.timeToFirstByte.observe({ gen_ai_request_model: call.model.id, stream: 'false' }, call.reply.elapsedTime / 1000);
  call.finish({ outcome: 'completed', usage, storageBytes: 0, attempt });
  return call.reply.send(message);
}

/** The chat stream's events, rebuilt as Anthropic's (MessagesStream) for the relay. */
class ChatAsMessagesEvents implements EventTranslator {
  constructor(private readonly stream: MessagesStream) {}

  get usage(): ReportedUsage | null {
    return this.stream.usage;
  }

  get completed(): boolean {
    return this.stream.completed;
  }

  event(event: Buffer): Buffer | null {
    const data = parseEventData(event);
    if (data === null) return null;
    const out = this.stream.chunk(data);
    return out === '' ? null : Buffer.from(out);
  }

  end(): Buffer | null {
    const out = this.stream.end();
    return out === '' ? null : Buffer.from(out);
  }
}

/**
 * `POST /v1/messages/count_tokens`: forwarded to a native upstream; for any other, the gateway's own
 * estimate (the bound it reserves with: src/quota/request-charge.ts), which counts bytes, not tokens.
 */
export async function countMessageTokens(ctx: ModelCallContext, request: FastifyRequest, reply: FastifyReply, projectId: string): Promise<unknown> {
  const body = request.body as MessagesBody;
  const model = ctx.models.serving(body.model, 'messages');
  if (model.api !== 'anthropic') return { input_tokens: estimatePromptTokens(OPERATIONS.messages, body) };
  const call = new ModelCall(ctx, request, reply, projectId, model, OPERATIONS.count_tokens, false, { metersTokens: false });
  return call.run(async () => {
    const upstream = { path: `${OPERATIONS.count_tokens.path}${queryOf(request.url)}`, headers: anthropicHeadersOf(request.headers) };
    return relayJson(call, await call.send((upstreamModel) => upstreamBody(body, upstreamModel), undefined, upstream));
  });
}
