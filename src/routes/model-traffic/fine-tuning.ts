import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelopeSchema } from '../../http/envelope.js';
import { upstreamError } from '../../http/errors.js';
import { UPSTREAM_ID_PATTERN } from '../../core/ids.js';
import { ErrorResponse, errorResponses, Nullable } from '../../http/schemas.js';
import { principalOf } from '../principal-of-request.js';
import { callResource, readReplyJson, withoutEnvelopeFields } from '../../model-call/resource-call.js';
import { Metadata, MetadataPatch, RecordTimes } from '../management/record-schemas.js';
import { newRecord, recordView, registerRecord, updateOwnRecord } from '../management/record-updates.js';

export const FineTuningJobFields = {
  name: Nullable(Type.String()),
  model: Nullable(Type.String()),
  job_status: Nullable(Type.String()),
  project_id: Type.String(),
  metadata: Metadata,
  ...RecordTimes,
};

export const FineTuningJobView = envelopeSchema(FineTuningJobFields);

const CreatedJobView = envelopeSchema(FineTuningJobFields, undefined, { open: true });

/** What the gateway checks of a job creation; other fields (hyperparameters, suffix, …) pass through. */
const CreateJobBody = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 256 }),
    training_file: Type.String({ minLength: 1, maxLength: 256 }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: true },
);

export const fineTuningRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.post(
    '/v1/fine_tuning/jobs',
    {
      config: { scope: 'model', modelCall: { traffic: 'model', work: 'fine_tuning' } },
      schema: {
        summary: 'Create a fine-tuning job at the backend the model routes to, registered to the calling project',
        body: CreateJobBody,
        response: { 200: CreatedJobView, ...errorResponses, 502: ErrorResponse, 504: ErrorResponse },
      },
    },
    async (request, reply) => {
      const { projectId } = principalOf(request);
      // `name` is the gateway's label for the job; the backend does not know it.
      const { name, ...forwarded } = request.body;
      const model = ctx.models.serving(forwarded.model, 'fine_tuning');
      const response = await callResource(ctx, request, reply, model, (upstreamModel) => ({
        path: '/fine_tuning/jobs',
        body: JSON.stringify({ ...forwarded, model: upstreamModel }),
        contentType: 'application/json',
        accept: 'application/json',
      }));
      const job = await readReplyJson(response);
      if (typeof job.id !== 'string' || !new RegExp(UPSTREAM_ID_PATTERN).test(job.id)) {
        throw upstreamError('The model backend answered without a usable job id.');
      }
      const record = newRecord(
        'fine_tuning_job',
        projectId,
        job.id,
        { name: name ?? null, model: model.id, job_status: typeof job.status === 'string' ? job.status : null },
        forwarded.metadata ?? {},
        ctx.now(),
      );
      await registerRecord(ctx, request.id, record, { model: model.id });
      return { ...withoutEnvelopeFields(job), ...recordView(record) } as Static<typeof CreatedJobView>;
    },
  );

  app.patch(
    '/v1/fine_tuning/jobs/:job_id',
    {
      config: { scope: 'model' },
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
