import { Type, type TProperties } from 'typebox';

type EnvelopeKeys = 'id' | 'object' | 'status';

export type Envelope<T extends object> = { id: string; object: 'nova.resource'; status: 'succeeded' } & Omit<T, EnvelopeKeys>;

/** The one place the success envelope is built: the three envelope fields always win. */
export function envelope<T extends object>(id: string, fields: T): Envelope<T> {
  return { id, object: 'nova.resource', status: 'succeeded', ...stripEnvelopeKeys(fields) } as Envelope<T>;
}

function stripEnvelopeKeys<T extends object>(fields: T): Omit<T, EnvelopeKeys> {
  const { id: _id, object: _object, status: _status, ...rest } = fields as T & Record<EnvelopeKeys, unknown>;
  return rest;
}

/** Response schema of an envelope carrying `properties` (used for serialisation and /openapi.json). */
export function envelopeSchema<P extends TProperties>(properties: P, description?: string, options: { open?: boolean } = {}) {
  return Type.Object(
    {
      id: Type.String(),
      object: Type.Literal('nova.resource'),
      status: Type.Literal('succeeded'),
      ...properties,
    },
    {
      ...(description ? { description } : {}),
      // Open: fields the upstream adds (segments, words, hyperparameters, …) are passed on.
      ...(options.open ? { additionalProperties: true } : {}),
    },
  );
}
