import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../app-context.js';
import { ErrorResponse, errorResponses } from '../../http/schemas.js';
import { OPERATIONS } from '../../core/operations.js';
import { upstreamBody } from '../../model-call/upstream-body.js';
import { conversationHistoryTokens, planConversation, storeExchange } from '../../model-call/chat-conversation.js';
import { ChatTranscript } from '../../model-call/chat-transcript.js';
import { completeJson } from '../../model-call/chat-json-reply.js';
import { ChatBodySchema, ChatCompletion, type ChatBody } from '../../model-call/chat-schema.js';
import { ModelCall } from '../../model-call/model-call.js';
import { relayStream } from '../../model-call/stream-relay.js';
import { principalOf } from '../principal-of-request.js';

/** Fields of a chat request the gateway consumes and does not send upstream. */
const GATEWAY_FIELDS = new Set(['conversation_id', 'store']);
const chat = OPERATIONS.chat;

export const chatRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.post(
    '/v1/chat/completions',
    {
      config: { scope: 'model', modelCall: { traffic: 'model', work: 'chat', historyTokens: conversationHistoryTokens } },
      schema: {
        summary: 'Create a chat completion (stream: true for server-sent events)',
        body: ChatBodySchema,
        response: { 200: ChatCompletion, ...errorResponses, 502: ErrorResponse, 504: ErrorResponse },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const body = request.body as ChatBody;
      const model = ctx.models.serving(body.model, 'chat');
      const plan = await planConversation(ctx, principal.projectId, body, request, reply);
      const call = new ModelCall(ctx, request, reply, principal.projectId, model, chat, body.stream === true);
      return call.run(async () => {
        const sent = await call.send((upstreamModel) =>
          upstreamBody(body, upstreamModel, { drop: GATEWAY_FIELDS, history: plan.history, askStreamUsage: true }),
        );
        if (!call.stream) return completeJson(call, sent, body, plan);
        const transcript = plan.store && plan.id !== null ? new ChatTranscript() : null;
        return relayStream(call, sent, {
          hideUsage: body.stream_options?.include_usage !== true,
          onEvent: transcript?.onEvent,
          onComplete: () =>
            transcript ? storeExchange(ctx, request.log, principal.projectId, plan, model.id, body.messages, transcript.message()) : 0,
          headers: plan.id !== null ? { 'x-conversation-id': plan.id } : undefined,
        });
      });
    },
  );
};
