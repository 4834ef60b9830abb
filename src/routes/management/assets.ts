import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelopeSchema } from '../../http/envelope.js';
import { errorResponses, Nullable } from '../../http/schemas.js';
import { Metadata, MetadataPatch, RecordTimes, Tags } from './record-schemas.js';
import { updateOwnRecord } from './record-updates.js';

export const AssetFields = {
  asset_kind: Type.Union([Type.Literal('image'), Type.Literal('audio')]),
  model: Nullable(Type.String()),
  tags: Tags,
  metadata: Metadata,
  project_id: Type.String(),
  ...RecordTimes,
};

export const AssetView = envelopeSchema(AssetFields);

export const assetRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.patch(
    '/v1/assets/:asset_id',
    {
      config: { scope: 'model' },
      schema: {
        summary: 'Update the metadata and tags of a generated image or audio asset (media untouched)',
        params: Type.Object({ asset_id: Type.String({ maxLength: 128 }) }),
        body: Type.Object({ metadata: MetadataPatch, tags: Type.Optional(Tags) }, { additionalProperties: false }),
        response: { 200: AssetView, ...errorResponses },
      },
    },
    async (request) => {
      const { metadata, tags } = request.body;
      return updateOwnRecord<Static<typeof AssetView>>(ctx, request, 'asset', request.params.asset_id, {
        fields: tags === undefined ? {} : { tags },
        metadata,
      });
    },
  );
};
