import { Value } from 'typebox/value';
import { fullPolicy, type RateLimitPolicy } from '../store/policy.js';
import { GatewayConfigSchema, type FilledGatewayConfig, type RawGatewayConfig } from './schema.js';

/**
 * The validated config with every default filled in: what the app is built from. The schema's
 * defaults give every field but two, computed from others in `withDefaults`.
 */
export type GatewayConfig = Omit<FilledGatewayConfig, 'defaults' | 'server'> & {
  /** The policy of new projects: defaults.rate_limits and defaults.budgets together. */
  defaults: { rate_limits: RateLimitPolicy };
  server: Omit<FilledGatewayConfig['server'], 'headers_timeout_ms'> & { headers_timeout_ms: number };
};

/** Fills the schema's defaults into a copy of `raw` (which is not checked: see validateConfig). */
export function withDefaults(raw: RawGatewayConfig): GatewayConfig {
  const filled = Value.Default(GatewayConfigSchema, structuredClone(raw)) as FilledGatewayConfig;
  const { defaults, server } = filled;
  return {
    ...filled,
    defaults: { rate_limits: fullPolicy({ ...defaults.rate_limits, ...defaults.budgets }) },
    // 10 s, but never longer than the whole request may take.
    server: { ...server, headers_timeout_ms: server.headers_timeout_ms ?? Math.min(10_000, server.body_timeout_ms) },
  };
}

/** A config for tests and for programmatic use: the echo model and every default. */
export function defaultConfig(overrides: Partial<RawGatewayConfig> = {}): GatewayConfig {
  return withDefaults({ models: [{ id: 'echo-1', provider: 'echo' }], ...overrides });
}
