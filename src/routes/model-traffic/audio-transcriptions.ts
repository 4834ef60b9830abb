import { requireModel } from '../../auth/key-access.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import multipart from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { FormData } from 'undici';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelopeSchema } from '../../http/envelope.js';
import { ApiError, invalidParameter, payloadTooLarge } from '../../http/errors.js';
import { mintId } from '../../core/ids.js';
import { audioDurationSeconds } from '../../model-call/audio-duration.js';
import { principalOf } from '../principal-of-request.js';
import { callResource, readReplyBytes, readReplyJson, resourceUsage, withoutEnvelopeFields } from '../../model-call/resource-call.js';
import { ErrorResponse, errorResponses, Nullable } from '../../http/schemas.js';
import { RecordTimes } from '../management/record-schemas.js';
import { newRecord, recordView, registerRecord, updateOwnRecord } from '../management/record-updates.js';

export const TranscriptionFields = {
  text: Type.String(),
  language: Nullable(Type.String()),
  model: Nullable(Type.String()),
  duration_seconds: Nullable(Type.Number()),
  project_id: Type.String(),
  ...RecordTimes,
};

export const TranscriptionView = envelopeSchema(TranscriptionFields);

/** A BCP 47 tag in its canonical form ("en-us" → "en-US"), or a 400 naming the parameter. */
export function canonicalLanguage(tag: string, param = 'language'): string {
  try {
    const [canonical] = Intl.getCanonicalLocales(tag);
    if (canonical) return canonical;
  } catch {
    // RangeError: not a well-formed tag
  }
  throw invalidParameter(`'${tag.slice(0, 64)}' is not a valid BCP 47 language tag.`, param);
}

const CreatedTranscriptionView = envelopeSchema(TranscriptionFields, undefined, { open: true });

interface Upload {
  fields: Record<string, string>;
  file: { bytes: Buffer; filename: string; mimetype: string } | null;
}

/** Reads the multipart form: its fields and the one `file`, refusing anything over the size limit. */
async function readUpload(request: FastifyRequest, limitBytes: number): Promise<Upload> {
  if (!request.isMultipart()) {
    throw invalidParameter('Send multipart/form-data with a "file" and a "model".', 'content-type');
  }
  const upload: Upload = { fields: {}, file: null };
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        if (part.fieldname !== 'file' || upload.file) throw invalidParameter('Send exactly one file, as the "file" field.', part.fieldname);
        upload.file = { bytes: await part.toBuffer(), filename: part.filename || 'audio', mimetype: part.mimetype };
      } else {
        upload.fields[part.fieldname] = String(part.value);
      }
    }
  } catch (error) {
    if ((error as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE') throw payloadTooLarge(limitBytes);
    if (error instanceof ApiError) throw error;
    throw invalidParameter('The multipart body is malformed.', 'body');
  }
  return upload;
}

/** The language of a transcript: the client's tag, else the backend's when it is a tag, canonicalised. */
function transcriptLanguage(requested: string | undefined, reported: unknown): string | null {
  if (requested !== undefined) return canonicalLanguage(requested);
  if (typeof reported === 'string' && /^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$/.test(reported)) {
    try {
      return Intl.getCanonicalLocales(reported)[0] ?? null;
    } catch {
      return null;
    }
  }
  return null;
}

export const audioTranscriptionRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const uploadLimit = ctx.config.server.audio_upload_limit_bytes;
  await app.register(multipart, { limits: { fileSize: uploadLimit, files: 1, fields: 32, fieldSize: 64 * 1024, parts: 40 } });

  app.post(
    '/v1/audio/transcriptions',
    {
      config: { scope: 'model', modelCall: { traffic: 'model', work: 'audio_transcriptions' } },
      // The multipart reader enforces the file limit itself; this only keeps Fastify's out of its way.
      bodyLimit: uploadLimit + 1024 * 1024,
      schema: {
        summary: 'Transcribe an uploaded audio file (multipart: file, model, language, …) and keep the transcript as a record',
        response: { 200: CreatedTranscriptionView, ...errorResponses, 413: ErrorResponse, 502: ErrorResponse, 504: ErrorResponse },
      },
    },
    async (request, reply) => {
      const { projectId, access } = principalOf(request);
      const { fields, file } = await readUpload(request, uploadLimit);
      if (!fields.model) throw invalidParameter("Missing required parameter 'model'.", 'model');
      // The form is read here, after admission (src/routes/admission-hook.ts checks JSON bodies): checked before the upstream call.
      requireModel(access, fields.model, ctx.models.resolve(fields.model)?.id);
      if (!file) throw invalidParameter("Missing required parameter 'file'.", 'file');
      const language = fields.language === undefined ? undefined : canonicalLanguage(fields.language);
      const model = ctx.models.serving(fields.model, 'audio');
      const response = await callResource(ctx, request, reply, model, (upstreamModel) => {
        const form = new FormData();
        for (const [name, value] of Object.entries(fields)) form.append(name, name === 'model' ? upstreamModel : value);
        form.append('file', new Blob([new Uint8Array(file.bytes)], { type: file.mimetype }), file.filename);
        return { path: '/audio/transcriptions', body: form, accept: 'application/json, text/plain' };
      });
      const isJson = String(response.headers['content-type'] ?? '').includes('json');
      const transcript = isJson ? await readReplyJson(response) : { text: (await readReplyBytes(response)).toString('utf8') };
      const reported = typeof transcript.duration === 'number' && transcript.duration >= 0 ? transcript.duration : null;
      const duration = reported ?? (await audioDurationSeconds(file.bytes, file.mimetype));
      const now = ctx.now();
      const record = newRecord(
        'transcription',
        projectId,
        mintId('trans', now),
        {
          text: typeof transcript.text === 'string' ? transcript.text : '',
          language: transcriptLanguage(language, transcript.language),
          model: model.id,
          duration_seconds: duration,
        },
        {},
        now,
      );
      await registerRecord(ctx, request.id, record, { model: model.id, audioSeconds: duration ?? 0, ...resourceUsage(transcript, response.target) });
      return { ...withoutEnvelopeFields(transcript), ...recordView(record) } as Static<typeof CreatedTranscriptionView>;
    },
  );

  app.put(
    '/v1/audio/transcriptions/:transcription_id',
    {
      config: { scope: 'model' },
      schema: {
        summary: 'Replace the transcript text and language of a transcription record',
        params: Type.Object({ transcription_id: Type.String({ maxLength: 128 }) }),
        body: Type.Object(
          { text: Type.String(), language: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })) },
          { additionalProperties: false },
        ),
        response: { 200: TranscriptionView, ...errorResponses },
      },
    },
    async (request) => {
      const { text, language } = request.body;
      // Replace semantics: an omitted language clears it.
      const canonical = language === undefined ? null : canonicalLanguage(language);
      return updateOwnRecord<Static<typeof TranscriptionView>>(ctx, request, 'transcription', request.params.transcription_id, {
        fields: { text, language: canonical },
      });
    },
  );
};
