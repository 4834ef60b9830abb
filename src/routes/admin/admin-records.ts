import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../app-context.js';
import { resourceNotFound } from '../../http/errors.js';
import { mintId } from '../../core/ids.js';
import { errorResponses } from '../../http/schemas.js';
import type { ManagedRecord } from '../../store/record-types.js';
import { AssetView } from '../management/assets.js';
import { canonicalLanguage, TranscriptionView } from '../model-traffic/audio-transcriptions.js';
import { FineTuningJobView } from '../model-traffic/fine-tuning.js';
import { Metadata, RecordId, Tags } from '../management/record-schemas.js';
import { newRecord, recordView, registerRecord } from '../management/record-updates.js';

const ProjectParams = Type.Object({ project_id: Type.String({ maxLength: 128 }) });
const Model = Type.String({ minLength: 1, maxLength: 256 });

/**
 * Registers records that were created outside the gateway (directly at a backend), so
 * their project can manage them through the /v1 record routes. Lives in the admin scope.
 */
export const adminRecordRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const register = async <View>(requestId: string, record: ManagedRecord): Promise<View> => {
    if (!(await ctx.store.projects.get(record.project_id))) throw resourceNotFound('project', 'project_id');
    await registerRecord(ctx, requestId, record);
    return recordView(record) as View;
  };

  app.post(
    '/admin/v1/projects/:project_id/fine_tuning/jobs',
    {
      schema: {
        summary: 'Register a fine-tuning job created at a backend',
        params: ProjectParams,
        body: Type.Object(
          {
            id: RecordId,
            name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
            model: Type.Optional(Model),
            job_status: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
            metadata: Type.Optional(Metadata),
          },
          { additionalProperties: false },
        ),
        response: { 200: FineTuningJobView, ...errorResponses },
      },
    },
    async (request) => {
      const { id, name, model, job_status: jobStatus, metadata } = request.body;
      const fields = { name: name ?? null, model: model ?? null, job_status: jobStatus ?? null };
      return register<Static<typeof FineTuningJobView>>(request.id, newRecord('fine_tuning_job', request.params.project_id, id, fields, metadata ?? {}, ctx.now()));
    },
  );

  app.post(
    '/admin/v1/projects/:project_id/audio/transcriptions',
    {
      schema: {
        summary: 'Register a transcription made at a backend',
        params: ProjectParams,
        body: Type.Object(
          {
            id: Type.Optional(RecordId),
            text: Type.String(),
            language: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
            model: Type.Optional(Model),
            duration_seconds: Type.Optional(Type.Number({ minimum: 0 })),
          },
          { additionalProperties: false },
        ),
        response: { 200: TranscriptionView, ...errorResponses },
      },
    },
    async (request) => {
      const { id, text, language, model, duration_seconds: duration } = request.body;
      const fields = {
        text,
        language: language === undefined ? null : canonicalLanguage(language),
        model: model ?? null,
        duration_seconds: duration ?? null,
      };
      const recordId = id ?? mintId('trans', ctx.now());
      return register<Static<typeof TranscriptionView>>(request.id, newRecord('transcription', request.params.project_id, recordId, fields, {}, ctx.now()));
    },
  );

  app.post(
    '/admin/v1/projects/:project_id/assets',
    {
      schema: {
        summary: 'Register a generated image or audio asset made at a backend',
        params: ProjectParams,
        body: Type.Object(
          {
            id: Type.Optional(RecordId),
            asset_kind: Type.Union([Type.Literal('image'), Type.Literal('audio')]),
            model: Type.Optional(Model),
            metadata: Type.Optional(Metadata),
            tags: Type.Optional(Tags),
          },
          { additionalProperties: false },
        ),
        response: { 200: AssetView, ...errorResponses },
      },
    },
    async (request) => {
      const { id, asset_kind: assetKind, model, metadata, tags } = request.body;
      const fields = { asset_kind: assetKind, model: model ?? null, tags: tags ?? [] };
      const recordId = id ?? mintId('asset', ctx.now());
      return register<Static<typeof AssetView>>(request.id, newRecord('asset', request.params.project_id, recordId, fields, metadata ?? {}, ctx.now()));
    },
  );
};
