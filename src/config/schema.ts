import { Type, type Static, type TSchema } from 'typebox';

const ModelEndpoint = Type.Union([
  Type.Literal('chat'),
  Type.Literal('completions'),
  Type.Literal('embeddings'),
  Type.Literal('responses'),
  Type.Literal('images'),
  Type.Literal('audio'),
  Type.Literal('fine_tuning'),
]);

/** Bounds of every policy field, shared by the config, the PATCH route and the admin API. */
export const POLICY_BOUNDS = {
  requests_per_minute: { minimum: 1, maximum: 1_000_000 },
  burst_limit: { minimum: 0, maximum: 1_000_000 },
  tokens_per_minute: { minimum: 1, maximum: 1_000_000_000_000 },
  max_concurrent_requests: { minimum: 1, maximum: 1_000_000 },
  daily_tokens: { minimum: 0, maximum: 1_000_000_000_000_000 },
  monthly_tokens: { minimum: 0, maximum: 1_000_000_000_000_000 },
  monthly_cost: { minimum: 0, maximum: 1_000_000_000_000 },
} as const;

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** Every policy field, optional and nullable (null: none): ceilings, and the optional limits. */
export const NullablePolicyFields = {
  requests_per_minute: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.requests_per_minute))),
  burst_limit: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.burst_limit))),
  tokens_per_minute: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.tokens_per_minute))),
  max_concurrent_requests: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.max_concurrent_requests))),
  daily_tokens: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.daily_tokens))),
  monthly_tokens: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.monthly_tokens))),
  monthly_cost: Type.Optional(Nullable(Type.Number(POLICY_BOUNDS.monthly_cost))),
};
const { tokens_per_minute, max_concurrent_requests, daily_tokens, monthly_tokens, monthly_cost } = NullablePolicyFields;

const RateLimitPolicy = Type.Object(
  {
    requests_per_minute: Type.Integer(POLICY_BOUNDS.requests_per_minute),
    burst_limit: Type.Integer(POLICY_BOUNDS.burst_limit),
    tokens_per_minute,
    max_concurrent_requests,
  },
  { additionalProperties: false },
);

const Budgets = Type.Object({ daily_tokens, monthly_tokens, monthly_cost }, { additionalProperties: false });

/** Default entitlements: the most a project key may set for itself (null or absent: no ceiling). */
const CeilingsSchema = Type.Object(NullablePolicyFields, { additionalProperties: false });

/** Dollars per million tokens; what usage `cost`, the cost metric and cost budgets are computed from. */
const Pricing = Type.Object(
  {
    input_per_million: Type.Number({ minimum: 0, maximum: 1_000_000 }),
    output_per_million: Type.Number({ minimum: 0, maximum: 1_000_000 }),
  },
  { additionalProperties: false },
);

/** A further target of a model, tried in order when the ones before it fail before any byte reached the client. */
export const FallbackTargetSchema = Type.Object(
  {
    upstream: Type.String({ pattern: '^https?://' }),
    upstream_model: Type.Optional(Type.String({ minLength: 1 })),
    api_key_env: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' })),
    timeout_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 3_600_000 })),
    /** The target's own prices; default: the model's. */
    pricing: Type.Optional(Pricing),
  },
  { additionalProperties: false },
);

export const ModelConfigSchema = Type.Object(
  {
    id: Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' }),
    provider: Type.Optional(Type.Literal('echo')),
    upstream: Type.Optional(Type.String({ pattern: '^https?://' })),
    upstream_model: Type.Optional(Type.String({ minLength: 1 })),
    api_key_env: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' })),
    timeout_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 3_600_000 })),
    context_window: Type.Optional(Type.Integer({ minimum: 1 })),
    max_output_tokens: Type.Optional(Type.Integer({ minimum: 1 })),
    owned_by: Type.Optional(Type.String({ minLength: 1 })),
    endpoints: Type.Optional(Type.Array(ModelEndpoint, { minItems: 1, uniqueItems: true })),
    fallbacks: Type.Optional(Type.Array(FallbackTargetSchema, { maxItems: 8 })),
    pricing: Type.Optional(Pricing),
  },
  { additionalProperties: false },
);

export const GatewayConfigSchema = Type.Object(
  {
    models: Type.Array(ModelConfigSchema, { minItems: 1 }),
    defaults: Type.Optional(
      Type.Object({ rate_limits: Type.Optional(RateLimitPolicy), budgets: Type.Optional(Budgets) }, { additionalProperties: false }),
    ),
    ceilings: Type.Optional(CeilingsSchema),
    server: Type.Optional(
      Type.Object(
        {
          body_limit_bytes: Type.Optional(Type.Integer({ minimum: 1024, maximum: 100 * 1024 * 1024 })),
          audio_upload_limit_bytes: Type.Optional(Type.Integer({ minimum: 1024, maximum: 1024 * 1024 * 1024 })),
          drain_timeout_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 3_600_000 })),
          trust_proxy: Type.Optional(Type.Union([Type.Boolean(), Type.String({ minLength: 1 })])),
          headers_timeout_ms: Type.Optional(Type.Integer({ minimum: 100, maximum: 600_000 })),
          body_timeout_ms: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
          keep_alive_timeout_ms: Type.Optional(Type.Integer({ minimum: 100, maximum: 3_600_000 })),
          // 0: no cap (a gateway behind a load balancer sees few addresses).
          max_connections_per_address: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
          json_max_depth: Type.Optional(Type.Integer({ minimum: 2, maximum: 1000 })),
        },
        { additionalProperties: false },
      ),
    ),
    auth: Type.Optional(
      Type.Object(
        {
          cache_ttl_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 3_600_000 })),
          failed_attempts: Type.Optional(
            Type.Object(
              {
                max: Type.Integer({ minimum: 1 }),
                window_seconds: Type.Integer({ minimum: 1 }),
                block_seconds: Type.Integer({ minimum: 0 }),
              },
              { additionalProperties: false },
            ),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    conversations: Type.Optional(
      Type.Object(
        {
          retention_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 400 * 86_400 })),
          max_messages: Type.Optional(Type.Integer({ minimum: 2, maximum: 100_000 })),
          store_default: Type.Optional(Type.Boolean()),
          max_bytes_per_project: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })),
        },
        { additionalProperties: false },
      ),
    ),
    upstream: Type.Optional(
      Type.Object(
        {
          max_sse_event_bytes: Type.Optional(Type.Integer({ minimum: 1024, maximum: 256 * 1024 * 1024 })),
          max_json_reply_bytes: Type.Optional(Type.Integer({ minimum: 1024, maximum: 1024 * 1024 * 1024 })),
        },
        { additionalProperties: false },
      ),
    ),
    responses: Type.Optional(
      Type.Object(
        { retention_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 400 * 86_400 })) },
        { additionalProperties: false },
      ),
    ),
    redis: Type.Optional(
      Type.Object(
        {
          command_timeout_ms: Type.Optional(Type.Integer({ minimum: 10, maximum: 60_000 })),
          key_prefix: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_:-]{1,32}$' })),
        },
        { additionalProperties: false },
      ),
    ),
    rate_limits: Type.Optional(
      Type.Object(
        {
          // The rolling window of requests_per_minute: 60 in production; tests shorten it.
          window_seconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 3600 })),
          burst_window_seconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 86_400 })),
          fallback_share: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1 })),
          // Per-project limit of management routes (keys, projects, usage, …), apart from the model policy.
          management_requests_per_minute: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
          // The limiter's structure: requests_per_minute up to exact_log_max keeps the exact log; above it,
          // and for tokens, sub_windows counters per window.
          exact_log_max: Type.Optional(Type.Integer({ minimum: 0, maximum: 500 })),
          sub_windows: Type.Optional(Type.Integer({ minimum: 1, maximum: 120 })),
          lease_ttl_seconds: Type.Optional(Type.Number({ minimum: 1, maximum: 30 })),
          // The output a request may produce when it names no max_tokens and its model no max_output_tokens (also a cap on the latter).
          default_max_output_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000_000 })),
          // While Redis is unreachable budgets cannot be checked: admit (open) or refuse (closed) budgeted projects.
          budgets_when_store_down: Type.Optional(Type.Union([Type.Literal('open'), Type.Literal('closed')])),
        },
        { additionalProperties: false },
      ),
    ),
    usage: Type.Optional(
      Type.Object(
        {
          minute_retention_hours: Type.Optional(Type.Integer({ minimum: 1, maximum: 24 * 31 })),
          hour_retention_days: Type.Optional(Type.Integer({ minimum: 1, maximum: 3660 })),
          buffer_max_records: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000_000 })),
          flush_interval_ms: Type.Optional(Type.Integer({ minimum: 10, maximum: 60_000 })),
        },
        { additionalProperties: false },
      ),
    ),
    metrics: Type.Optional(
      Type.Object(
        { project_label: Type.Optional(Type.Boolean()) },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export type RawGatewayConfig = Static<typeof GatewayConfigSchema>;
export type ModelConfig = Static<typeof ModelConfigSchema>;
export type FallbackTargetConfig = Static<typeof FallbackTargetSchema>;
export type ModelEndpointName = Static<typeof ModelEndpoint>;
export type RateLimitPolicyConfig = Static<typeof RateLimitPolicy>;
export type CeilingsConfig = Static<typeof CeilingsSchema>;
export type PricingConfig = Static<typeof Pricing>;
