import type { ModelConfig, RateLimitPolicyConfig, RawGatewayConfig } from './schema.js';

/** The validated config with every default filled in: what the app is built from. */
export interface GatewayConfig {
  models: ModelConfig[];
  defaults: { rate_limits: RateLimitPolicyConfig };
  server: { body_limit_bytes: number; drain_timeout_ms: number; trust_proxy: boolean | string };
  auth: {
    cache_ttl_ms: number;
    failed_attempts: { max: number; window_seconds: number; block_seconds: number };
  };
  redis: { command_timeout_ms: number; key_prefix: string };
}

export function withDefaults(raw: RawGatewayConfig): GatewayConfig {
  return {
    models: raw.models,
    defaults: { rate_limits: raw.defaults?.rate_limits ?? { requests_per_minute: 600, burst_limit: 100 } },
    server: {
      body_limit_bytes: raw.server?.body_limit_bytes ?? 1024 * 1024,
      drain_timeout_ms: raw.server?.drain_timeout_ms ?? 30_000,
      trust_proxy: raw.server?.trust_proxy ?? false,
    },
    auth: {
      cache_ttl_ms: raw.auth?.cache_ttl_ms ?? 10_000,
      failed_attempts: raw.auth?.failed_attempts ?? { max: 30, window_seconds: 60, block_seconds: 60 },
    },
    redis: {
      command_timeout_ms: raw.redis?.command_timeout_ms ?? 1000,
      key_prefix: raw.redis?.key_prefix ?? 'nova',
    },
  };
}

/** A config for tests and for programmatic use: the echo model and every default. */
export function defaultConfig(overrides: Partial<RawGatewayConfig> = {}): GatewayConfig {
  return withDefaults({ models: [{ id: 'echo-1', provider: 'echo' }], ...overrides });
}
