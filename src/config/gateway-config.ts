import { Ajv } from 'ajv';
import { fullPolicy, type RateLimitPolicy } from '../store/policy.js';
import { GatewayConfigSchema, type FilledGatewayConfig, type RawGatewayConfig } from './schema.js';

/**
 * The validated config with every default filled in: what the app is built from. The schema's
 * defaults give every field but two, computed from others in `completeConfig`.
 */
export type GatewayConfig = Omit<FilledGatewayConfig, 'defaults' | 'server'> & {
  /** The policy of new projects: defaults.rate_limits and defaults.budgets together. */
  defaults: { rate_limits: RateLimitPolicy };
  server: Omit<FilledGatewayConfig['server'], 'headers_timeout_ms'> & { headers_timeout_ms: number };
};

/**
 * Checks a config against the schema and fills in, in place, the default of every field it leaves
 * out (useDefaults), in every section, past an error too (allErrors; errors[0] is still the first).
 */
export const checkConfig = new Ajv({ useDefaults: true, allErrors: true, strict: false }).compile<FilledGatewayConfig>(GatewayConfigSchema);

/** The computed fields of a checked (and so filled) config. */
export function completeConfig(filled: FilledGatewayConfig): GatewayConfig {
  const { defaults, server } = filled;
  return {
    ...filled,
    defaults: { rate_limits: fullPolicy({ ...defaults.rate_limits, ...defaults.budgets }) },
    // 10 s, but never longer than the whole request may take.
    server: { ...server, headers_timeout_ms: server.headers_timeout_ms ?? Math.min(10_000, server.body_timeout_ms) },
  };
}

/** A config for tests and for programmatic use: the echo model and every default (`overrides` are not checked). */
export function defaultConfig(overrides: Partial<RawGatewayConfig> = {}): GatewayConfig {
  const config = structuredClone({ models: [{ id: 'echo-1', provider: 'echo' }], ...overrides });
  checkConfig(config);
  return completeConfig(config as FilledGatewayConfig);
}
