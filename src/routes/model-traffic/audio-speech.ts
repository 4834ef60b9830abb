import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { mintId } from '../../core/ids.js';
import { ErrorResponse, errorResponses } from '../../http/schemas.js';
import { audioDurationSeconds } from '../../model-call/audio-duration.js';
import { principalOf } from '../principal-of-request.js';
import { newRecord, registerRecord } from '../management/record-updates.js';
import { callResource, readReplyBytes } from '../../model-call/resource-call.js';

const SPEECH_LIMIT_BYTES = 64 * 1024 * 1024;

/** What the gateway checks; response_format, speed, instructions, … pass through. */
const SpeechBody = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 256 }),
    input: Type.String({ minLength: 1, maxLength: 16_384 }),
    voice: Type.String({ minLength: 1, maxLength: 128 }),
  },
  { additionalProperties: true },
);

export const audioSpeechRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.post(
    '/v1/audio/speech',
    {
      config: { scope: 'model', modelCall: { traffic: 'model', work: 'audio_speech' } },
      schema: {
        summary: 'Generate speech at the backend the model routes to; the body is the audio, its asset id is in x-asset-id',
        body: SpeechBody,
        response: {
          200: Type.Unsafe<Buffer>({ type: 'string', format: 'binary', description: 'The audio, as the backend encoded it' }),
          ...errorResponses,
          502: ErrorResponse,
          504: ErrorResponse,
        },
      },
    },
    async (request, reply) => {
      const { projectId } = principalOf(request);
      const model = ctx.models.serving(request.body.model, 'audio');
      const response = await callResource(ctx, request, reply, model, (upstreamModel) => ({
        path: '/audio/speech',
        body: JSON.stringify({ ...request.body, model: upstreamModel }),
        contentType: 'application/json',
        accept: '*/*',
      }));
      const audio = await readReplyBytes(response, SPEECH_LIMIT_BYTES);
      const contentType = String(response.headers['content-type'] ?? 'application/octet-stream');
      const seconds = await audioDurationSeconds(audio, contentType);
      const now = ctx.now();
      const assetId = mintId('asset', now);
      const record = newRecord('asset', projectId, assetId, { asset_kind: 'audio', model: model.id, tags: [] }, {}, now);
      await registerRecord(ctx, request.id, record, { model: model.id, audioSeconds: seconds ?? 0 });
      return reply.header('content-type', contentType).header('x-asset-id', assetId).send(audio);
    },
  );
};
