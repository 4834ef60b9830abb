import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelopeSchema } from '../../http/envelope.js';
import { upstreamError } from '../../http/errors.js';
import { mintId } from '../../core/ids.js';
import { ErrorResponse, errorResponses } from '../../http/schemas.js';
import { principalOf } from '../principal-of-request.js';
import { newRecord, registerRecord } from '../management/record-updates.js';
import { callResource, readReplyJson, resourceUsage } from '../../model-call/resource-call.js';

/** What the gateway checks; size, quality, response_format, … pass through. */
const GenerateBody = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 256 }),
    prompt: Type.String({ minLength: 1, maxLength: 32_000 }),
    n: Type.Optional(Type.Integer({ minimum: 1, maximum: 10 })),
  },
  { additionalProperties: true },
);

const GeneratedImages = envelopeSchema(
  {
    created: Type.Optional(Type.Integer()),
    model: Type.String(),
    data: Type.Array(Type.Object({ asset_id: Type.String() }, { additionalProperties: true })),
  },
  'Generated images; each item carries the asset_id under which its metadata is managed (PATCH /v1/assets/{asset_id}).',
  { open: true },
);

export const imageRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.post(
    '/v1/images/generations',
    {
      config: { scope: 'model', modelCall: { traffic: 'model', work: 'images' } },
      schema: {
        summary: 'Generate images at the backend the model routes to; each image becomes an asset of the project',
        body: GenerateBody,
        response: { 200: GeneratedImages, ...errorResponses, 502: ErrorResponse, 504: ErrorResponse },
      },
    },
    async (request, reply) => {
      const { projectId } = principalOf(request);
      const model = ctx.models.serving(request.body.model, 'images');
      const response = await callResource(ctx, request, reply, model, (upstreamModel) => ({
        path: '/images/generations',
        body: JSON.stringify({ ...request.body, model: upstreamModel }),
        contentType: 'application/json',
        accept: 'application/json',
      }));
      const generated = await readReplyJson(response);
      if (!Array.isArray(generated.data) || generated.data.length === 0) {
        throw upstreamError('The model backend answered without images.');
      }
      const now = ctx.now();
      const items = (generated.data as Record<string, unknown>[]).map((item) => ({ ...item, asset_id: mintId('asset', now) }));
      const records = items.map((item) =>
        newRecord('asset', projectId, item.asset_id, { asset_kind: 'image', model: model.id, tags: [] }, {}, now),
      );
      await registerRecord(ctx, request.id, records, { model: model.id, imageGenerations: items.length, ...resourceUsage(generated, response.target) });
      return {
        ...generated,
        id: items[0]!.asset_id,
        object: 'nova.resource',
        status: 'succeeded',
        model: model.id,
        data: items,
      } as Static<typeof GeneratedImages>;
    },
  );
};
