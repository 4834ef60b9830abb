import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { modelNotFound, projectMismatch } from '../../http/errors.js';
import { errorResponses, Nullable, ProjectIdParam } from '../../http/schemas.js';
import type { RegisteredModel } from '../../model-call/model-registry.js';
import { principalOf } from '../principal-of-request.js';

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

export const modelRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  // OpenAI's own list shape, so SDKs and tools that list models first work unchanged.
  app.get(
    '/v1/models',
    {
      schema: {
        summary: 'List the models available to the project, in OpenAI\'s shape',
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
    async () => ({
      object: 'list' as const,
      data: ctx.models.list().map((model) => ({
        id: model.id,
        object: 'model' as const,
        created: ctx.models.created,
        owned_by: model.ownedBy,
        endpoints: model.endpoints,
      })),
    }),
  );

  // A wildcard, as model ids may contain "/" (meta-llama/Llama-3.1-8B-Instruct), sent encoded or not.
  app.get(
    '/v1/models/*',
    {
      schema: {
        summary: 'Retrieve a model: capabilities, and limits with include_limits=true',
        params: Type.Object({ '*': Type.String({ maxLength: 256 }) }),
        querystring: ModelQuery,
        response: { 200: envelopeSchema(ModelFields), ...errorResponses },
      },
    },
    async (request) => {
      const { projectId } = principalOf(request);
      const { include_limits: includeLimits = false, project_id: queried } = request.query;
      if (queried !== undefined && queried !== projectId) throw projectMismatch();
      const model = ctx.models.get(request.params['*']);
      if (!model) throw modelNotFound('model_id');
      const { id, ...fields } = modelView(model, includeLimits);
      return envelope(id, fields);
    },
  );
};
