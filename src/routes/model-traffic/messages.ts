import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { Nullable } from '../../http/schemas.js';
import { callMessages, countMessageTokens } from '../../model-call/messages-call.js';
import { principalOf } from '../principal-of-request.js';

/** What the gateway reads of a Messages request (Anthropic requires each); the rest reaches the upstream unchecked. */
const MessagesBodySchema = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 256 }),
    max_tokens: Type.Integer({ minimum: 1 }),
    messages: Type.Array(Type.Unknown()),
    stream: Type.Optional(Nullable(Type.Boolean())),
  },
  { additionalProperties: true },
);

const CountTokensBodySchema = Type.Object(
  { model: Type.String({ minLength: 1, maxLength: 256 }), messages: Type.Array(Type.Unknown()) },
  { additionalProperties: true },
);

const AnthropicError = Type.Object(
  {
    type: Type.Literal('error'),
    error: Type.Object({ type: Type.String(), message: Type.String() }),
    request_id: Type.String(),
  },
  { description: "Error, in Anthropic's shape" },
);
const errors = { 400: AnthropicError, 401: AnthropicError, 404: AnthropicError, 413: AnthropicError, 429: AnthropicError, 502: AnthropicError, 503: AnthropicError, 504: AnthropicError, 529: AnthropicError };
const AnthropicObject = Type.Object({}, { additionalProperties: true, description: "The answer, in Anthropic's shape." });

/**
 * Anthropic's Messages API beside OpenAI's, with the same keys, limits and usage: what Claude Code
 * and the Anthropic SDKs call. Errors and rate-limit headers take Anthropic's shape on these routes.
 */
export const messagesRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.post(
    '/v1/messages',
    {
      config: { scope: 'model', modelCall: { traffic: 'model', work: 'messages' }, anthropic: true },
      schema: {
        summary: "Create a message, in Anthropic's Messages API (stream: true for server-sent events)",
        body: MessagesBodySchema,
        response: { 200: AnthropicObject, ...errors },
      },
    },
    (request, reply) => callMessages(ctx, request, reply, principalOf(request).projectId),
  );
  app.post(
    '/v1/messages/count_tokens',
    {
      config: { scope: 'model', modelCall: { traffic: 'model', work: 'count_tokens' }, anthropic: true },
      schema: {
        summary: "Count a message's input tokens (a gateway estimate for models not served by Anthropic's API)",
        body: CountTokensBodySchema,
        response: { 200: AnthropicObject, ...errors },
      },
    },
    (request, reply) => countMessageTokens(ctx, request, reply, principalOf(request).projectId),
  );
};
