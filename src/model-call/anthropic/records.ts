/** A JSON object as parsed: the shape every translation here reads and writes. */
export type Json = Record<string, unknown>;

export const isRecord = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value);
