import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../app-context.js';
import { ErrorResponse, errorResponses } from '../../http/schemas.js';
import { principalOf } from '../principal-of-request.js';
import { proxyModelRequest } from '../../model-call/pass-through.js';
import { modelRequestSchema, OpenAiObject } from './model-request-schema.js';

/** The legacy text completions and embeddings routes: OpenAI's shapes, passed through. */
export const completionRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const responses = { 200: OpenAiObject, ...errorResponses, 502: ErrorResponse, 504: ErrorResponse };
  app.post(
    '/v1/completions',
    {
      config: { scope: 'model', modelCall: { traffic: 'model', work: 'completions' } },
      schema: { summary: 'Create a text completion (legacy; stream: true for server-sent events)', body: modelRequestSchema(), response: responses },
    },
    (request, reply) => proxyModelRequest(ctx, request, reply, principalOf(request).projectId),
  );
  app.post(
    '/v1/embeddings',
    {
      config: { scope: 'model', modelCall: { traffic: 'model', work: 'embeddings' } },
      schema: { summary: 'Create embeddings (prompt tokens are counted)', body: modelRequestSchema(), response: responses },
    },
    (request, reply) => proxyModelRequest(ctx, request, reply, principalOf(request).projectId),
  );
};
