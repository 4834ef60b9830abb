import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelopeSchema } from '../http/envelope.js';
import { errorResponses, Nullable } from '../http/schemas.js';
import { Metadata, MetadataPatch, RecordTimes } from './record-schemas.js';
import { updateOwnRecord } from './record-updates.js';

export const FineTuningJobFields = {
  name: Nullable(Type.String()),
  model: Nullable(Type.String()),
  job_status: Nullable(Type.String()),
  project_id: Type.String(),
  metadata: Metadata,
  ...RecordTimes,
};

export const FineTuningJobView = envelopeSchema(FineTuningJobFields);

export const fineTuningRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.patch(
    '/v1/fine_tuning/jobs/:job_id',
    {
      schema: {
        summary: 'Update the label and metadata of a fine-tuning job (training data untouched)',
        params: Type.Object({ job_id: Type.String({ maxLength: 128 }) }),
        body: Type.Object(
          { name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })), metadata: Type.Optional(MetadataPatch) },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: FineTuningJobView, ...errorResponses },
      },
    },
    async (request) => {
      const { name, metadata } = request.body;
      return updateOwnRecord<Static<typeof FineTuningJobView>>(ctx, request, 'fine_tuning_job', request.params.job_id, {
        fields: name === undefined ? {} : { name },
        metadata,
      });
    },
  );
};
