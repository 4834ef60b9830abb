import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { invalidParameter, modelNotFound, projectMismatch } from '../../http/errors.js';
import type { FastifyReply } from 'fastify';
import { errorResponses, Nullable, ProjectIdParam } from '../../http/schemas.js';
import type { RegisteredModel } from '../../model-call/model-registry.js';
import { principalOf } from '../principal-of-request.js';
import { allowsModel, type KeyAccess } from '../../auth/key-access.js';

/** The configured models a key may use (its allow-list: src/auth/key-access.ts), in config order. */
const modelsFor = (ctx: AppContext, access: KeyAccess) => ctx.models.list().filter((model) => allowsModel(access, model.id, model.id));

const ModelFields = {
  owned_by: Type.String(),
  endpoints: Type.Array(Type.String(), { description: 'The routes this model serves: chat, completions, embeddings, responses, images, audio, fine_tuning' }),
  capabilities: Type.Object({
    chat: Type.Boolean(),
    streaming: Type.Boolean(),
    images: Type.Boolean(),
    audio: Type.Boolean(),
    fine_tuning: Type.Boolean(),
  }),
  limits: Type.Optional(Type.Object({ context_window: Nullable(Type.Integer()), max_output_tokens: Nullable(Type.Integer()) })),
};

const ModelQuery = Type.Object(
  { include_limits: Type.Optional(Type.Boolean({ default: false })), project_id: Type.Optional(ProjectIdParam) },
  { additionalProperties: false },
);

function modelView(model: RegisteredModel, includeLimits: boolean) {
  const has = (endpoint: RegisteredModel['endpoints'][number]) => model.endpoints.includes(endpoint);
  return {
    id: model.id,
    owned_by: model.ownedBy,
    endpoints: model.endpoints,
    capabilities: { chat: has('chat'), streaming: has('chat'), images: has('images'), audio: has('audio'), fine_tuning: has('fine_tuning') },
    ...(includeLimits ? { limits: { context_window: model.contextWindow, max_output_tokens: model.maxOutputTokens } } : {}),
  };
}

/** OpenAI's list shape, so SDKs and tools that list models first work unchanged. */
function openAiModelList(ctx: AppContext, access: KeyAccess) {
  return {
    object: 'list' as const,
    data: modelsFor(ctx, access).map((model) => ({
      id: model.id,
      object: 'model' as const,
      created: ctx.models.created,
      owned_by: model.ownedBy,
      endpoints: model.endpoints,
    })),
  };
}

/** Anthropic's model object: its SDKs' `models.list` and `models.retrieve` read these. */
function anthropicModel(ctx: AppContext, id: string) {
  return { type: 'model', id, display_name: id, created_at: new Date(ctx.models.created * 1000).toISOString() };
}

const ANTHROPIC_PAGE_MAX = 1000;

/** A page of Anthropic's model list (`limit`, `after_id`, `before_id`), in config order. */
function anthropicModelPage(ctx: AppContext, access: KeyAccess, query: unknown) {
  const fields = (query ?? {}) as Record<string, unknown>;
  const limitText = fields.limit ?? '20';
  const limit = Number(limitText);
  if (typeof limitText !== 'string' || !Number.isInteger(limit) || limit < 1 || limit > ANTHROPIC_PAGE_MAX) {
    throw invalidParameter(`limit must be an integer from 1 to ${ANTHROPIC_PAGE_MAX}.`, 'limit');
  }
  const ids = modelsFor(ctx, access).map((model) => model.id);
  const at = (name: string) => {
    const value = fields[name];
    if (value === undefined) return undefined;
    const index = typeof value === 'string' ? ids.indexOf(value) : -1;
    if (index === -1) throw invalidParameter(`${name} names no model of the list.`, name);
    return index;
  };
  const after = at('after_id');
  const before = at('before_id');
  let start = after === undefined ? 0 : after + 1;
  let end = before === undefined ? ids.length : before;
  // before_id pages backwards: the models just before it.
  if (before !== undefined && after === undefined) start = Math.max(0, end - limit);
  else end = Math.min(end, start + limit);
  const page = ids.slice(start, Math.max(start, end));
  const hasMore = before !== undefined && after === undefined ? start > 0 : start + page.length < (before ?? ids.length);
  return { data: page.map((id) => anthropicModel(ctx, id)), has_more: hasMore, first_id: page[0] ?? null, last_id: page.at(-1) ?? null };
}

/** Sent as written: the routes' response schemas describe OpenAI's shapes. */
const sendAnthropic = (reply: FastifyReply, body: unknown) => reply.type('application/json').send(JSON.stringify(body));

export const modelRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.get(
    '/v1/models',
    {
      config: { scope: null },
      schema: {
        summary: "List the models available to the project, in OpenAI's shape (Anthropic's with an anthropic-version header)",
        response: {
          200: Type.Object({
            object: Type.Literal('list'),
            data: Type.Array(
              Type.Object({
                id: Type.String(),
                object: Type.Literal('model'),
                created: Type.Integer(),
                owned_by: Type.String(),
                endpoints: ModelFields.endpoints,
              }),
            ),
          }),
          ...errorResponses,
        },
      },
    },
    async (request, reply) => {
      const { access } = principalOf(request);
      if (request.headers['anthropic-version'] !== undefined) return sendAnthropic(reply, anthropicModelPage(ctx, access, request.query));
      return openAiModelList(ctx, access);
    },
  );

  // A wildcard, as model ids may contain "/" (meta-llama/Llama-3.1-8B-Instruct), sent encoded or not.
  app.get(
    '/v1/models/*',
    {
      config: { scope: null },
      schema: {
        summary: 'Retrieve a model: capabilities, and limits with include_limits=true',
        params: Type.Object({ '*': Type.String({ maxLength: 256 }) }),
        querystring: ModelQuery,
        response: { 200: envelopeSchema(ModelFields), ...errorResponses },
      },
    },
    async (request, reply) => {
      const { projectId, access } = principalOf(request);
      const { include_limits: includeLimits = false, project_id: queried } = request.query;
      if (queried !== undefined && queried !== projectId) throw projectMismatch();
      const name = request.params['*'];
      const model = ctx.models.resolve(name);
      // A model the key may not use is not there for it, as in the list.
      if (!model || !allowsModel(access, name, model.id)) throw modelNotFound('model_id');
      if (request.headers['anthropic-version'] !== undefined) return sendAnthropic(reply, anthropicModel(ctx, name));
      const { id, ...fields } = modelView(model, includeLimits);
      return envelope(id, fields);
    },
  );
};
