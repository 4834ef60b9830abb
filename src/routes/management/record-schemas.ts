import { Type } from 'typebox';
import { IsoTime, Nullable } from '../../http/schemas.js';
import { UPSTREAM_ID_PATTERN } from '../../core/ids.js';

/** The OpenAI metadata convention: at most 16 keys of up to 64 characters, string values up to 512. */
export const METADATA_MAX_KEYS = 16;
// Names that mean something to JavaScript objects are refused rather than silently lost.
const RESERVED_KEYS = ['__proto__', 'constructor', 'prototype'];
const MetadataKey = { minLength: 1, maxLength: 64, not: { enum: RESERVED_KEYS } };
const MetadataValue = Type.String({ maxLength: 512 });

export const Metadata = Type.Record(Type.String(), MetadataValue, { propertyNames: MetadataKey, maxProperties: METADATA_MAX_KEYS });

/** PATCH metadata: merged into what is stored; a null value removes the key. */
export const MetadataPatch = Type.Record(Type.String(), Nullable(MetadataValue), {
  propertyNames: MetadataKey,
  maxProperties: METADATA_MAX_KEYS,
});

export const Tags = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 32 });

export const RecordId = Type.String({ pattern: UPSTREAM_ID_PATTERN });

export const RecordTimes = { created_at: IsoTime, updated_at: IsoTime };
