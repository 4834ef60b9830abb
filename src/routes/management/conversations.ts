import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { invalidParameter, resourceNotFound } from '../../http/errors.js';
import { isGatewayId } from '../../core/ids.js';
import { errorResponses, IsoTime, Nullable, PageLimit } from '../../http/schemas.js';
import { principalOf } from '../principal-of-request.js';

/** A stored message as it was written (tool calls, tool results, names, …), with its id and time. */
const Message = Type.Object({ id: Type.String(), role: Type.String(), created_at: IsoTime }, { additionalProperties: true });

const ConversationParams = Type.Object({ conversation_id: Type.String({ maxLength: 128 }) });

const ConversationView = envelopeSchema({
  project_id: Type.String(),
  model: Type.String(),
  created_at: IsoTime,
  updated_at: IsoTime,
  expires_at: IsoTime,
  message_count: Type.Integer(),
  messages: Type.Optional(Type.Array(Message)),
  has_more: Type.Optional(Type.Boolean()),
  next_cursor: Type.Optional(Nullable(Type.String())),
});

export const conversationRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.get(
    '/v1/conversations/:conversation_id',
    {
      config: { scope: 'conversations:read' },
      schema: {
        summary: 'Retrieve a stored conversation; include_messages=true pages through its messages, oldest first',
        params: ConversationParams,
        querystring: Type.Object(
          {
            include_messages: Type.Optional(Type.Boolean({ default: false })),
            after: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
            limit: Type.Optional(PageLimit),
          },
          { additionalProperties: false },
        ),
        response: { 200: ConversationView, ...errorResponses },
      },
    },
    async (request) => {
      const { projectId } = principalOf(request);
      const { conversation_id: conversationId } = request.params;
      const { include_messages: includeMessages = false, after, limit = 20 } = request.query;
      // Another project's conversation is indistinguishable from one that does not exist.
      const record = isGatewayId('conv', conversationId) ? await ctx.store.conversations.get(projectId, conversationId) : null;
      if (!record) throw resourceNotFound('conversation', 'conversation_id');
      const { id, bytes: _bytes, ...fields } = record;
      if (!includeMessages) return envelope(id, fields);
      if (after !== undefined && !isGatewayId('msg', after)) throw invalidParameter('after must be a message id of this conversation.', 'after');
      const page = await ctx.store.conversations.messages(projectId, conversationId, after ?? null, limit);
      if (!page) throw invalidParameter('after must be a message id of this conversation.', 'after');
      const last = page.data.at(-1);
      return envelope(id, {
        ...fields,
        messages: page.data,
        has_more: page.hasMore,
        next_cursor: page.hasMore && last ? last.id : null,
      });
    },
  );

  app.delete(
    '/v1/conversations/:conversation_id',
    {
      // Deleting is not reading: the scope of the model calls that store conversations.
      config: { scope: 'model' },
      schema: {
        summary: 'Delete a stored conversation and its messages; its bytes leave the project\'s storage_bytes',
        params: ConversationParams,
        response: { 200: envelopeSchema({ deleted: Type.Literal(true) }), ...errorResponses },
      },
    },
    async (request) => {
      const { projectId } = principalOf(request);
      const { conversation_id: conversationId } = request.params;
      const bytes = isGatewayId('conv', conversationId) ? await ctx.store.conversations.delete(projectId, conversationId) : null;
      if (bytes === null) throw resourceNotFound('conversation', 'conversation_id');
      if (bytes !== 0) ctx.usage.record({ projectId, requestId: request.id, storageBytesDelta: -bytes });
      return envelope(conversationId, { deleted: true as const });
    },
  );
};
