import { Type, type TProperties } from 'typebox';

type EnvelopeKeys = 'id' | 'object' | 'status';

export type Envelope<T extends object> = { id: string; object: 'nova.resource'; status: 'succeeded' } & Omit<T, EnvelopeKeys>;

/** The one place the success envelope is built: the three envelope fields always win. */
export function envelope<T extends object>(id: string, fields: T): Envelope<T> {
  const out: Record<string, unknown> = { id, object: 'nova.resource', status: 'succeeded' };
  // A loop, not rest destructuring, which V8 runs as a runtime call per object (every answer passes here).
  for (const key of Object.keys(fields)) {
    if (key === 'id' || key === 'object' || key === 'status') continue;
    const value = (fields as Record<string, unknown>)[key];
    // An upstream's "__proto__" member stays a member, as with spreading.
    if (key === '__proto__') Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
    else out[key] = value;
  }
  return out as Envelope<T>;
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
