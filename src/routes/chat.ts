import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelopeSchema } from '../http/envelope.js';
import { modelNotFound } from '../http/errors.js';
import { ErrorResponse, errorResponses, Nullable } from '../http/schemas.js';
import type { ChatBody } from '../upstream/chat-body.js';
import { ClientGone } from '../upstream/upstream-errors.js';
import { ChatCall } from './chat-call.js';
import { planConversation } from './chat-conversation.js';
import { completeJson, outcomeOf } from './chat-json.js';
import { completeStream } from './chat-stream.js';
import { principalOf } from './principal-of-request.js';

const ContentPart = Type.Object({ type: Type.String({ minLength: 1 }) }, { additionalProperties: true });

const ChatMessageSchema = Type.Object(
  {
    role: Type.Enum(['system', 'user', 'assistant']),
    content: Type.Union([Type.String(), Type.Array(ContentPart, { minItems: 1 })]),
  },
  { additionalProperties: true },
);

/** What the gateway checks; every other field (temperature, tools, …) passes through to the upstream. */
export const ChatBodySchema = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 256 }),
    messages: Type.Array(ChatMessageSchema, { minItems: 1, maxItems: 10_000 }),
    stream: Type.Optional(Type.Boolean()),
    stream_options: Type.Optional(
      Nullable(Type.Object({ include_usage: Type.Optional(Type.Boolean()) }, { additionalProperties: true })),
    ),
    conversation_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    store: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: true },
);

const Usage = Type.Object({ prompt_tokens: Type.Integer(), completion_tokens: Type.Integer(), total_tokens: Type.Integer() });

const ChatCompletion = envelopeSchema(
  {
    created: Type.Integer(),
    model: Type.String(),
    choices: Type.Array(Type.Object({}, { additionalProperties: true })),
    usage: Usage,
    conversation_id: Nullable(Type.String()),
    system_fingerprint: Type.Optional(Nullable(Type.String())),
  },
  'A chat completion (stream: false). With stream: true the answer is text/event-stream in the OpenAI chunk format, ' +
    'ending with data: [DONE]; the conversation id is in the x-conversation-id header.',
);

export const chatRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.post(
    '/v1/chat/completions',
    {
      schema: {
        summary: 'Create a chat completion (stream: true for server-sent events)',
        body: ChatBodySchema,
        response: { 200: ChatCompletion, ...errorResponses, 502: ErrorResponse, 504: ErrorResponse },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const body = request.body as ChatBody;
      const model = ctx.models.get(body.model);
      if (!model || !model.endpoints.includes('chat')) throw modelNotFound();
      const plan = await planConversation(ctx, principal.projectId, body);
      const call = new ChatCall(ctx, request, reply, principal.projectId, model, body, plan);
      // A client that disconnects cancels the upstream request, whichever stage it is in.
      reply.raw.once('close', () => {
        if (!reply.raw.writableEnded) call.controller.abort(new ClientGone());
      });
      try {
        // The JSON path returns the envelope; the streaming path has sent the stream (typed loosely).
        return (await (call.stream ? completeStream(call) : completeJson(call))) as never;
      } catch (error) {
        call.finish({ outcome: outcomeOf(error), promptTokens: 0, completionTokens: 0, storageBytes: 0, attempt: null });
        if (call.controller.signal.aborted) {
          // Nobody is left to answer.
          reply.hijack();
          reply.raw.destroy();
          return reply as never;
        }
        throw error;
      }
    },
  );
};
