import { Type, type TProperties } from 'typebox';
import { Nullable } from '../../http/schemas.js';

/** The fields every OpenAI model request is read for; anything else passes through unchecked. */
export function modelRequestSchema(extra: TProperties = {}) {
  return Type.Object(
    {
      model: Type.String({ minLength: 1, maxLength: 256 }),
      stream: Type.Optional(Nullable(Type.Boolean())),
      stream_options: Type.Optional(
        Nullable(Type.Object({ include_usage: Type.Optional(Nullable(Type.Boolean())) }, { additionalProperties: true })),
      ),
      ...extra,
    },
    { additionalProperties: true },
  );
}

/** An answer in OpenAI's own shape, passed through as the upstream sent it. */
export const OpenAiObject = Type.Object({}, { additionalProperties: true, description: "The upstream's answer, in OpenAI's own shape." });
