import { Type, type Static, type TObject, type TOptional, type TSchema } from 'typebox';
import { DEFAULT_ALERT_THRESHOLDS } from '../store/alert-types.js';

/**
 * A field the file may leave out: checking the config fills in `value` (Ajv's useDefaults, see
 * gateway-config.ts), and the chart's values.schema.json shows it. Its type keeps the default, so
 * `Filled` knows the field is always there in a checked config.
 */
function Defaulted<T extends TSchema>(type: T, value: Static<T>): TOptional<T & { default: Static<T> }> {
  return Type.Optional(Type.With(type, { default: value })) as TOptional<T & { default: Static<T> }>;
}

/** The schema of a checked value: a field with a default is no longer optional. */
type Filled<T extends TSchema> =
  T extends TObject<infer Properties>
    ? TObject<{ [K in keyof Properties]: Properties[K] extends { default: unknown } ? Filled<Omit<Properties[K], '~optional'>> : Filled<Properties[K]> }>
    : T;

const ModelEndpoint = Type.Union([
  Type.Literal('chat'),
  Type.Literal('completions'),
  Type.Literal('embeddings'),
  Type.Literal('responses'),
  Type.Literal('images'),
  Type.Literal('audio'),
  Type.Literal('fine_tuning'),
  Type.Literal('messages'),
]);

/** What a model's upstream speaks: OpenAI's API (default), or Anthropic's Messages API natively. */
const UpstreamApi = Type.Union([Type.Literal('openai'), Type.Literal('anthropic')]);
/** How the upstream key is sent: `Authorization: Bearer` or `x-api-key` (default: bearer for openai, x-api-key for anthropic). */
const AuthHeader = Type.Union([Type.Literal('bearer'), Type.Literal('x-api-key')]);

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
    /** Prompt tokens read from the upstream's prompt cache; default: input_per_million. */
    cached_input_per_million: Type.Optional(Type.Number({ minimum: 0, maximum: 1_000_000 })),
    /** Prompt tokens written to the upstream's prompt cache; default: input_per_million. */
    cache_write_per_million: Type.Optional(Type.Number({ minimum: 0, maximum: 1_000_000 })),
  },
  { additionalProperties: false },
);

/** A further target of a model, tried in order when the ones before it fail before any byte reached the client. */
export const FallbackTargetSchema = Type.Object(
  {
    upstream: Type.String({ pattern: '^https?://' }),
    upstream_model: Type.Optional(Type.String({ minLength: 1 })),
    api_key_env: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' })),
    auth_header: Type.Optional(AuthHeader),
    timeout_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 3_600_000 })),
    /** The target's own prices; default: the model's. */
    pricing: Type.Optional(Pricing),
  },
  { additionalProperties: false },
);

/** One of a model's equal targets (DESIGN.md section 10): balanced, health-checked, capped per replica. */
export const FleetTargetSchema = Type.Object(
  {
    ...FallbackTargetSchema.properties,
    weight: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    /** Requests in flight from this replica to this target; beyond it a request waits in the model's queue. */
    max_concurrent: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
  },
  { additionalProperties: false },
);

export const ModelConfigSchema = Type.Object(
  {
    id: Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$' }),
    provider: Type.Optional(Type.Literal('echo')),
    upstream: Type.Optional(Type.String({ pattern: '^https?://' })),
    targets: Type.Optional(Type.Array(FleetTargetSchema, { minItems: 1, maxItems: 64 })),
    balance: Type.Optional(Type.Union([Type.Literal('least_outstanding'), Type.Literal('weighted_round_robin')])),
    health: Type.Optional(
      Type.Object(
        {
          eject_after_failures: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
          eject_seconds: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 3600 })),
          // A path on the target's origin, answered 2xx when it is up: `/health`.
          probe: Type.Optional(Type.String({ pattern: '^/', maxLength: 512 })),
        },
        { additionalProperties: false },
      ),
    ),
    queue: Type.Optional(
      Type.Object(
        {
          max_wait_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 3_600_000 })),
          max_depth: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
        },
        { additionalProperties: false },
      ),
    ),
    /** Sends the request's priority to the upstream as vLLM's `priority` field (lower is sooner). */
    priority_param: Type.Optional(Type.Boolean()),
    upstream_model: Type.Optional(Type.String({ minLength: 1 })),
    api_key_env: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' })),
    // Every target of a model speaks the same API.
    api: Type.Optional(UpstreamApi),
    auth_header: Type.Optional(AuthHeader),
    // Other ids clients send for this model (exact, or with `*` as a wildcard): `claude-*`.
    aliases: Type.Optional(Type.Array(Type.String({ pattern: '^[A-Za-z0-9*][A-Za-z0-9_.:/*@-]{0,127}$' }), { uniqueItems: true, maxItems: 64 })),
    timeout_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 3_600_000 })),
    context_window: Type.Optional(Type.Integer({ minimum: 1 })),
    max_output_tokens: Type.Optional(Type.Integer({ minimum: 1 })),
    // The most output the token rate reserves per request (budgets reserve the whole bound).
    reserve_output_tokens_max: Type.Optional(Type.Integer({ minimum: 1 })),
    owned_by: Type.Optional(Type.String({ minLength: 1 })),
    endpoints: Type.Optional(Type.Array(ModelEndpoint, { minItems: 1, uniqueItems: true })),
    fallbacks: Type.Optional(Type.Array(FallbackTargetSchema, { maxItems: 8 })),
    pricing: Type.Optional(Pricing),
  },
  { additionalProperties: false },
);

/**
 * Without a `ceilings` section a key may raise its request rate and burst to 10,000 and its
 * token rate to 2,000,000 a minute; the other limits have no ceiling until the operator sets one.
 */
const DEFAULT_CEILINGS = { requests_per_minute: 10_000, burst_limit: 10_000, tokens_per_minute: 2_000_000 };

/** A webhook told of budget alerts and key expiry (src/alerts/); its secret comes from `secret_env`. */
const AlertWebhookSchema = Type.Object(
  {
    url: Type.String({ pattern: '^https?://' }),
    // The Standard Webhooks signing secret (`whsec_` + base64); required for format standard.
    secret_env: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' })),
    format: Defaulted(Type.Union([Type.Literal('standard'), Type.Literal('slack')]), 'standard'),
    thresholds: Defaulted(Type.Array(Type.Number({ exclusiveMinimum: 0, maximum: 10 }), { minItems: 1, maxItems: 16, uniqueItems: true }), [...DEFAULT_ALERT_THRESHOLDS]),
  },
  { additionalProperties: false },
);

/** Waits between delivery attempts: 11 attempts over about 24 h (src/alerts/delivery-worker.ts). */
const RETRY_DELAYS_MS = [5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000, 28_800_000];

const MiB = 1024 * 1024;
const DAY = 86_400;

export const GatewayConfigSchema = Type.Object(
  {
    models: Type.Array(ModelConfigSchema, { minItems: 1 }),
    defaults: Defaulted(
      Type.Object(
        {
          rate_limits: Defaulted(RateLimitPolicy, { requests_per_minute: 600, burst_limit: 100 }),
          budgets: Type.Optional(Budgets),
        },
        { additionalProperties: false },
      ),
      {},
    ),
    ceilings: Defaulted(CeilingsSchema, DEFAULT_CEILINGS),
    server: Defaulted(
      Type.Object(
        {
          body_limit_bytes: Defaulted(Type.Integer({ minimum: 1024, maximum: 100 * MiB }), MiB),
          // Model routes (chat, completions, responses, messages, …): agent sessions send long histories.
          model_body_limit_bytes: Defaulted(Type.Integer({ minimum: 1024, maximum: 1024 * MiB }), 32 * MiB),
          audio_upload_limit_bytes: Defaulted(Type.Integer({ minimum: 1024, maximum: 1024 * MiB }), 25 * MiB),
          drain_timeout_ms: Defaulted(Type.Integer({ minimum: 0, maximum: 3_600_000 }), 30_000),
          trust_proxy: Defaulted(Type.Union([Type.Boolean(), Type.String({ minLength: 1 })]), false),
          // The request line and headers must arrive within this, from the request's first byte.
          // No fixed default: gateway-config.ts derives it from body_timeout_ms.
          headers_timeout_ms: Type.Optional(
            Type.Integer({ minimum: 100, maximum: 600_000, description: 'Default: 10000, or body_timeout_ms when that is less.' }),
          ),
          // The whole request, body included, must arrive within this, from its first byte.
          body_timeout_ms: Defaulted(Type.Integer({ minimum: 100, maximum: 3_600_000 }), 60_000),
          // An idle keep-alive connection is closed after this.
          keep_alive_timeout_ms: Defaulted(Type.Integer({ minimum: 100, maximum: 3_600_000 }), 72_000),
          // Open connections one client address may hold; 0: no cap (a gateway behind a load balancer sees few addresses).
          max_connections_per_address: Defaulted(Type.Integer({ minimum: 0, maximum: 1_000_000 }), 1024),
          // Open connections in total; 0: no cap. No fixed default: connection-guard.ts derives it from
          // the file-descriptor limit (80% of the soft limit minus 256).
          max_connections: Type.Optional(
            Type.Integer({ minimum: 0, maximum: 1_000_000, description: 'Default: 80% of the soft open-files limit minus 256.' }),
          ),
          // Requests of one connection handled at once; beyond, the connection is not read until they finish.
          max_pipelined_requests: Defaulted(Type.Integer({ minimum: 1, maximum: 1024 }), 16),
          // After the grace period a body must keep arriving at this rate or the request gets 408; 0: no minimum.
          body_min_bytes_per_second: Defaulted(Type.Integer({ minimum: 0, maximum: 100 * MiB }), 1024),
          body_min_rate_grace_ms: Defaulted(Type.Integer({ minimum: 0, maximum: 3_600_000 }), 10_000),
          // The deepest nesting of arrays and objects a JSON body may have.
          json_max_depth: Defaulted(Type.Integer({ minimum: 2, maximum: 1000 }), 64),
          // A connection with reply bytes pending that takes none for this long is dropped (src/http/slow-readers.ts).
          write_timeout_ms: Defaulted(Type.Integer({ minimum: 100, maximum: 3_600_000 }), 30_000),
          // A large pending write is given this rate on top of write_timeout_ms before its client counts as not reading.
          write_min_bytes_per_second: Defaulted(Type.Integer({ minimum: 1, maximum: 64 * 1024 * MiB }), 64 * 1024),
          // Reply bytes the replica holds for clients that have not taken them; over it the slowest readers are dropped.
          max_buffered_reply_bytes: Defaulted(Type.Integer({ minimum: MiB, maximum: 64 * 1024 * MiB }), 256 * MiB),
        },
        { additionalProperties: false },
      ),
      {},
    ),
    auth: Defaulted(
      Type.Object(
        {
          cache_ttl_ms: Defaulted(Type.Integer({ minimum: 0, maximum: 3_600_000 }), 10_000),
          failed_attempts: Defaulted(
            Type.Object(
              {
                max: Type.Integer({ minimum: 1 }),
                window_seconds: Type.Integer({ minimum: 1 }),
                block_seconds: Type.Integer({ minimum: 0 }),
              },
              { additionalProperties: false },
            ),
            { max: 30, window_seconds: 60, block_seconds: 60 },
          ),
        },
        { additionalProperties: false },
      ),
      {},
    ),
    console: Defaulted(
      Type.Object(
        {
          // The web console at /console/ (docs/console.md); its sign-in, sessions and static files.
          enabled: Defaulted(Type.Boolean(), true),
          // How long a console session lasts after sign-in.
          session_ttl_seconds: Defaulted(Type.Integer({ minimum: 1, maximum: 7 * DAY }), 12 * 3600),
        },
        { additionalProperties: false },
      ),
      {},
    ),
    conversations: Defaulted(
      Type.Object(
        {
          retention_seconds: Defaulted(Type.Integer({ minimum: 60, maximum: 400 * DAY }), 30 * DAY),
          max_messages: Defaulted(Type.Integer({ minimum: 2, maximum: 100_000 }), 1000),
          store_default: Defaulted(Type.Boolean(), false),
          max_bytes_per_project: Defaulted(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), 50 * MiB),
        },
        { additionalProperties: false },
      ),
      {},
    ),
    upstream: Defaulted(
      Type.Object(
        {
          max_sse_event_bytes: Defaulted(Type.Integer({ minimum: 1024, maximum: 256 * MiB }), 4 * MiB),
          max_json_reply_bytes: Defaulted(Type.Integer({ minimum: 1024, maximum: 1024 * MiB }), 32 * MiB),
        },
        { additionalProperties: false },
      ),
      {},
    ),
    responses: Defaulted(
      Type.Object(
        {
          // As long as OpenAI keeps a stored response.
          retention_seconds: Defaulted(Type.Integer({ minimum: 60, maximum: 400 * DAY }), 30 * DAY),
          // A background response is polled this often until it ends (src/model-call/background-response.ts).
          background_poll_ms: Defaulted(Type.Integer({ minimum: 10, maximum: 600_000 }), 2000),
          // Followed at most this long; past it the request stays charged its reservation.
          background_max_ms: Defaulted(Type.Integer({ minimum: 100, maximum: 1000 * DAY }), 600_000),
        },
        { additionalProperties: false },
      ),
      {},
    ),
    redis: Defaulted(
      Type.Object(
        {
          command_timeout_ms: Defaulted(Type.Integer({ minimum: 10, maximum: 60_000 }), 1000),
          key_prefix: Defaulted(Type.String({ pattern: '^[A-Za-z0-9_:-]{1,32}$' }), 'nova'),
        },
        { additionalProperties: false },
      ),
      {},
    ),
    rate_limits: Defaulted(
      Type.Object(
        {
          // The rolling window of requests_per_minute: 60 in production; tests shorten it.
          window_seconds: Defaulted(Type.Number({ exclusiveMinimum: 0, maximum: 3600 }), 60),
          burst_window_seconds: Defaulted(Type.Number({ exclusiveMinimum: 0, maximum: 86_400 }), 600),
          fallback_share: Defaulted(Type.Number({ exclusiveMinimum: 0, maximum: 1 }), 0.5),
          // Per-project limit of management routes (keys, projects, usage, …), apart from the model policy.
          management_requests_per_minute: Defaulted(Type.Integer({ minimum: 1, maximum: 1_000_000 }), 1200),
          // The limiter's structure: requests_per_minute up to exact_log_max keeps the exact log; above it,
          // and for tokens, sub_windows counters per window.
          exact_log_max: Defaulted(Type.Integer({ minimum: 0, maximum: 500 }), 500),
          sub_windows: Defaulted(Type.Integer({ minimum: 1, maximum: 120 }), 60),
          lease_ttl_seconds: Defaulted(Type.Number({ minimum: 1, maximum: 30 }), 15),
          // The output a request may produce when it names no max_tokens and its model no max_output_tokens (also a cap on the latter).
          default_max_output_tokens: Defaulted(Type.Integer({ minimum: 1, maximum: 10_000_000 }), 4096),
          // While Redis is unreachable budgets cannot be checked: admit (open) or refuse (closed) budgeted projects.
          budgets_when_store_down: Defaulted(Type.Union([Type.Literal('open'), Type.Literal('closed')]), 'open'),
        },
        { additionalProperties: false },
      ),
      {},
    ),
    usage: Defaulted(
      Type.Object(
        {
          minute_retention_hours: Defaulted(Type.Integer({ minimum: 1, maximum: 24 * 31 }), 48),
          hour_retention_days: Defaulted(Type.Integer({ minimum: 1, maximum: 3660 }), 400),
          buffer_max_records: Defaulted(Type.Integer({ minimum: 1, maximum: 10_000_000 }), 100_000),
          flush_interval_ms: Defaulted(Type.Integer({ minimum: 10, maximum: 60_000 }), 1000),
        },
        { additionalProperties: false },
      ),
      {},
    ),
    metrics: Defaulted(Type.Object({ project_label: Defaulted(Type.Boolean(), true) }, { additionalProperties: false }), {}),
    alerts: Defaulted(
      Type.Object(
        {
          webhooks: Defaulted(Type.Array(AlertWebhookSchema, { maxItems: 32 }), []),
          // After the last of these the delivery is given up (status failed).
          retry_delays_ms: Defaulted(Type.Array(Type.Integer({ minimum: 1, maximum: DAY * 1000 }), { minItems: 0, maxItems: 32 }), RETRY_DELAYS_MS),
          // One attempt (connect, headers and body) ends after this; a hanging receiver holds one slot no longer.
          delivery_timeout_ms: Defaulted(Type.Integer({ minimum: 10, maximum: 120_000 }), 10_000),
          // Attempts one replica makes at once.
          delivery_concurrency: Defaulted(Type.Integer({ minimum: 1, maximum: 256 }), 8),
          poll_interval_ms: Defaulted(Type.Integer({ minimum: 10, maximum: 60_000 }), 1000),
          // An event a replica read but did not hand on for this long (it stopped) is taken by another.
          claim_timeout_ms: Defaulted(Type.Integer({ minimum: 100, maximum: 3_600_000 }), 60_000),
          // How often keys are checked for api_key.expiring (7 days and 1 day before expires_at).
          expiry_scan_interval_ms: Defaulted(Type.Integer({ minimum: 100, maximum: 86_400_000 }), 3_600_000),
        },
        { additionalProperties: false },
      ),
      {},
    ),
  },
  { additionalProperties: false },
);

/** The config as written in the file (every field with a default may be left out). */
export type RawGatewayConfig = Static<typeof GatewayConfigSchema>;
/** The config once checked, with every default of the schema filled in. */
export type FilledGatewayConfig = Static<Filled<typeof GatewayConfigSchema>>;
export type ModelConfig = Static<typeof ModelConfigSchema>;
export type FallbackTargetConfig = Static<typeof FallbackTargetSchema>;
export type FleetTargetConfig = Static<typeof FleetTargetSchema>;
export type ModelEndpointName = Static<typeof ModelEndpoint>;
export type RateLimitPolicyConfig = Static<typeof RateLimitPolicy>;
export type CeilingsConfig = Static<typeof CeilingsSchema>;
export type PricingConfig = Static<typeof Pricing>;
export type UpstreamApiName = Static<typeof UpstreamApi>;
export type AuthHeaderName = Static<typeof AuthHeader>;
export type AlertWebhookConfig = Static<typeof AlertWebhookSchema>;
