import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelopeSchema } from '../http/envelope.js';
import { invalidParameter } from '../http/errors.js';
import { errorResponses, Nullable } from '../http/schemas.js';
import { RecordTimes } from './record-schemas.js';
import { updateOwnRecord } from './record-updates.js';

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

export const audioTranscriptionRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.put(
    '/v1/audio/transcriptions/:transcription_id',
    {
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
