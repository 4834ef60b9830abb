import { Type } from 'typebox';
import { IsoTime, Nullable } from '../../http/schemas.js';

/** The usage endpoint's query and answer (docs/limits-and-usage.md, "Usage"). */
export const UsageQuerySchema = Type.Object(
  {
    start_time: Type.Optional(IsoTime),
    end_time: Type.Optional(IsoTime),
    bucket_width: Type.Optional(Type.Union([Type.Literal('1m'), Type.Literal('1h'), Type.Literal('1d')])),
    group_by: Type.Optional(Type.Union([Type.Literal('model'), Type.Literal('api_key')])),
  },
  { additionalProperties: false },
);

const UsageMeasures = {
  requests: Type.Integer(),
  tokens: Type.Object({
    /** All input processed, cached reads and cache writes included. */
    prompt: Type.Integer(),
    /** Reasoning included. */
    completion: Type.Integer(),
    total: Type.Integer(),
    /** Of prompt: read from the upstream's prompt cache. */
    cached_prompt: Type.Integer(),
    /** Of prompt: written to the upstream's prompt cache. */
    cache_write: Type.Integer(),
    /** Of completion: spent on reasoning. */
    reasoning: Type.Integer(),
  }),
  image_generations: Type.Integer(),
  audio_seconds: Type.Number(),
  /** Dollars, from the pricing of the targets that served the requests. */
  cost: Type.Number(),
  /** Model requests refused with 429 (or 503 for budgets that fail closed), by the kind of limit; not in requests. */
  refusals: Type.Object({
    requests: Type.Integer(),
    tokens: Type.Integer(),
    concurrency: Type.Integer(),
    budget: Type.Integer(),
  }),
  /** Admitted model requests that ended in an error answer (a 5xx, or a stream broken off). */
  errors: Type.Integer(),
};

/** A model's or key's share; the id is null for usage without one (management routes, admin records). */
const UsageGroup = Type.Object({
  model: Type.Optional(Nullable(Type.String())),
  api_key: Type.Optional(Nullable(Type.String())),
  ...UsageMeasures,
});

const UsageBucket = Type.Object({ start_time: IsoTime, end_time: IsoTime, ...UsageMeasures, groups: Type.Optional(Type.Array(UsageGroup)) });

export const UsageAnswerFields = {
  start_time: IsoTime,
  end_time: IsoTime,
  ...UsageMeasures,
  storage_bytes: Type.Integer(),
  granularity: Type.Union([Type.Literal('minute'), Type.Literal('hour')]),
  group_by: Type.Optional(Type.Union([Type.Literal('model'), Type.Literal('api_key')])),
  groups: Type.Optional(Type.Array(UsageGroup)),
  bucket_width: Type.Optional(Type.String()),
  buckets: Type.Optional(Type.Array(UsageBucket)),
};

export const UsageAnswer = Type.Object(UsageAnswerFields);
