import { fullPolicy, type Ceilings, type RateLimitPolicy } from '../store/policy.js';
import type { ModelConfig, RawGatewayConfig } from './schema.js';

/** The validated config with every default filled in: what the app is built from. */
export interface GatewayConfig {
  models: ModelConfig[];
  /** The policy of new projects: defaults.rate_limits and defaults.budgets together. */
  defaults: { rate_limits: RateLimitPolicy };
  /** Default entitlements (the admin API sets them per project). */
  ceilings: Ceilings;
  server: {
    body_limit_bytes: number;
    audio_upload_limit_bytes: number;
    drain_timeout_ms: number;
    trust_proxy: boolean | string;
    /** The request line and headers must arrive within this, from the request's first byte. */
    headers_timeout_ms: number;
    /** The whole request, body included, must arrive within this, from its first byte. */
    body_timeout_ms: number;
    /** An idle keep-alive connection is closed after this. */
    keep_alive_timeout_ms: number;
    /** Open connections one client address may hold; 0 = no cap. */
    max_connections_per_address: number;
    /** The deepest nesting of arrays and objects a JSON body may have. */
    json_max_depth: number;
  };
  auth: {
    cache_ttl_ms: number;
    failed_attempts: { max: number; window_seconds: number; block_seconds: number };
  };
  redis: { command_timeout_ms: number; key_prefix: string };
  conversations: { retention_seconds: number; max_messages: number; store_default: boolean; max_bytes_per_project: number };
  upstream: { max_sse_event_bytes: number; max_json_reply_bytes: number };
  responses: { retention_seconds: number };
  rate_limits: {
    window_seconds: number;
    burst_window_seconds: number;
    fallback_share: number;
    management_requests_per_minute: number;
    exact_log_max: number;
    sub_windows: number;
    lease_ttl_seconds: number;
    default_max_output_tokens: number;
    budgets_when_store_down: 'open' | 'closed';
  };
  usage: { minute_retention_hours: number; hour_retention_days: number; buffer_max_records: number; flush_interval_ms: number };
  metrics: { project_label: boolean };
}

/**
 * Without a `ceilings` section a key may raise its request rate and burst to 10,000 and its
 * token rate to 2,000,000 a minute; the other limits have no ceiling until the operator sets one.
 */
const DEFAULT_CEILINGS: Ceilings = { requests_per_minute: 10_000, burst_limit: 10_000, tokens_per_minute: 2_000_000 };

export function withDefaults(raw: RawGatewayConfig): GatewayConfig {
  return {
    models: raw.models,
    defaults: {
      rate_limits: fullPolicy({
        ...(raw.defaults?.rate_limits ?? { requests_per_minute: 600, burst_limit: 100 }),
        ...raw.defaults?.budgets,
      }),
    },
    ceilings: raw.ceilings ?? DEFAULT_CEILINGS,
    server: {
      body_limit_bytes: raw.server?.body_limit_bytes ?? 1024 * 1024,
      audio_upload_limit_bytes: raw.server?.audio_upload_limit_bytes ?? 25 * 1024 * 1024,
      drain_timeout_ms: raw.server?.drain_timeout_ms ?? 30_000,
      trust_proxy: raw.server?.trust_proxy ?? false,
      headers_timeout_ms: raw.server?.headers_timeout_ms ?? Math.min(10_000, raw.server?.body_timeout_ms ?? 60_000),
      body_timeout_ms: raw.server?.body_timeout_ms ?? 60_000,
      keep_alive_timeout_ms: raw.server?.keep_alive_timeout_ms ?? 72_000,
      max_connections_per_address: raw.server?.max_connections_per_address ?? 1024,
      json_max_depth: raw.server?.json_max_depth ?? 64,
    },
    auth: {
      cache_ttl_ms: raw.auth?.cache_ttl_ms ?? 10_000,
      failed_attempts: raw.auth?.failed_attempts ?? { max: 30, window_seconds: 60, block_seconds: 60 },
    },
    conversations: {
      retention_seconds: raw.conversations?.retention_seconds ?? 30 * 86_400,
      max_messages: raw.conversations?.max_messages ?? 1000,
      store_default: raw.conversations?.store_default ?? false,
      max_bytes_per_project: raw.conversations?.max_bytes_per_project ?? 50 * 1024 * 1024,
    },
    upstream: {
      max_sse_event_bytes: raw.upstream?.max_sse_event_bytes ?? 4 * 1024 * 1024,
      max_json_reply_bytes: raw.upstream?.max_json_reply_bytes ?? 32 * 1024 * 1024,
    },
    // As long as OpenAI keeps a stored response.
    responses: { retention_seconds: raw.responses?.retention_seconds ?? 30 * 86_400 },
    redis: {
      command_timeout_ms: raw.redis?.command_timeout_ms ?? 1000,
      key_prefix: raw.redis?.key_prefix ?? 'nova',
    },
    rate_limits: {
      window_seconds: raw.rate_limits?.window_seconds ?? 60,
      burst_window_seconds: raw.rate_limits?.burst_window_seconds ?? 600,
      fallback_share: raw.rate_limits?.fallback_share ?? 0.5,
      management_requests_per_minute: raw.rate_limits?.management_requests_per_minute ?? 1200,
      exact_log_max: raw.rate_limits?.exact_log_max ?? 500,
      sub_windows: raw.rate_limits?.sub_windows ?? 60,
      lease_ttl_seconds: raw.rate_limits?.lease_ttl_seconds ?? 15,
      default_max_output_tokens: raw.rate_limits?.default_max_output_tokens ?? 4096,
      budgets_when_store_down: raw.rate_limits?.budgets_when_store_down ?? 'open',
    },
    usage: {
      minute_retention_hours: raw.usage?.minute_retention_hours ?? 48,
      hour_retention_days: raw.usage?.hour_retention_days ?? 400,
      buffer_max_records: raw.usage?.buffer_max_records ?? 100_000,
      flush_interval_ms: raw.usage?.flush_interval_ms ?? 1000,
    },
    metrics: { project_label: raw.metrics?.project_label ?? true },
  };
}

/** A config for tests and for programmatic use: the echo model and every default. */
export function defaultConfig(overrides: Partial<RawGatewayConfig> = {}): GatewayConfig {
  return withDefaults({ models: [{ id: 'echo-1', provider: 'echo' }], ...overrides });
}
