import { Ajv } from 'ajv';
import { Type, type Static } from 'typebox';
import { ConfigError } from './load-config.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
/** One redis:// or rediss:// URL, or several separated by commas (the cluster's nodes, the sentinels). */
const REDIS_URLS = '^\\s*rediss?://[^,\\s][^,]*(,\\s*rediss?://[^,\\s][^,]*)*$';

const Port = (fallback: number) => Type.Integer({ minimum: 0, maximum: 65535, default: fallback, description: 'a port number 0..65535' });

/**
 * The environment variables (docs/configuration.md). The check fills in the defaults first, so a
 * variable with one is required here. A `description` ends the message refusing a bad value:
 * "environment variable NAME must be <description>".
 */
const EnvSchema = Type.Object({
  HOST: Type.String({ default: '0.0.0.0' }),
  PORT: Port(8080),
  METRICS_PORT: Port(9464),
  REDIS_URL: Type.Optional(Type.String({ pattern: REDIS_URLS, description: 'a redis:// or rediss:// URL' })),
  REDIS_MODE: Type.Enum(['standalone', 'cluster', 'sentinel'], { default: 'standalone', description: '"standalone", "cluster" or "sentinel"' }),
  /** The master group the sentinels watch (sentinel mode only). */
  REDIS_SENTINEL_MASTER: Type.Optional(Type.String()),
  /** The sentinels' own password, when they have one. */
  REDIS_SENTINEL_PASSWORD: Type.Optional(Type.String()),
  NOVA_CONFIG: Type.String({ default: 'config/gateway.yaml' }),
  NOVA_ADMIN_TOKEN: Type.Optional(Type.String({ minLength: 16, description: 'at least 16 characters' })),
  /** Seals the web console's session cookies; replicas share it. Default: derived from NOVA_ADMIN_TOKEN. */
  NOVA_CONSOLE_SECRET: Type.Optional(Type.String({ minLength: 32, description: 'at least 32 characters' })),
  LOG_LEVEL: Type.Enum(LOG_LEVELS, { default: 'info', description: `one of ${LOG_LEVELS.join(', ')}` }),
  NOVA_DRAIN_TIMEOUT_MS: Type.Optional(Type.Integer({ minimum: 0, description: 'a whole number of milliseconds' })),
});
type EnvName = keyof typeof EnvSchema.properties;
const ENV_NAMES = Object.keys(EnvSchema.properties) as EnvName[];

// Fills in the defaults (useDefaults); every value arrives as a string, coerceTypes turns "8080" into 8080.
const checkEnv = new Ajv({ useDefaults: true, coerceTypes: true, strict: false }).compile<Static<typeof EnvSchema>>(EnvSchema);

/** Reads the environment variables (docs/configuration.md); a bad value names the variable (never the value). */
export function readProcessSettings(env: NodeJS.ProcessEnv = process.env) {
  // An empty variable counts as unset.
  const vars: Record<string, unknown> = Object.fromEntries(ENV_NAMES.flatMap((name) => (env[name] ? [[name, env[name]]] : [])));
  if (!checkEnv(vars)) {
    const error = checkEnv.errors![0]!;
    const name = error.instancePath.slice(1) as EnvName;
    const { description } = EnvSchema.properties[name] as { description?: string };
    throw new ConfigError(`environment variable ${name} must be ${description ?? error.message}`);
  }
  if (vars.REDIS_MODE === 'sentinel' && (vars.REDIS_URL === undefined || vars.REDIS_SENTINEL_MASTER === undefined)) {
    throw new ConfigError(
      'REDIS_MODE=sentinel needs REDIS_URL (the sentinels, e.g. redis://sentinel-0:26379,redis://sentinel-1:26379) and REDIS_SENTINEL_MASTER (the master group name)',
    );
  }
  return {
    host: vars.HOST,
    port: vars.PORT,
    metricsPort: vars.METRICS_PORT,
    redisUrl: vars.REDIS_URL,
    redisMode: vars.REDIS_MODE,
    redisSentinelMaster: vars.REDIS_SENTINEL_MASTER,
    redisSentinelPassword: vars.REDIS_SENTINEL_PASSWORD,
    configPath: vars.NOVA_CONFIG,
    adminToken: vars.NOVA_ADMIN_TOKEN,
    consoleSecret: vars.NOVA_CONSOLE_SECRET,
    logLevel: vars.LOG_LEVEL,
    drainTimeoutMs: vars.NOVA_DRAIN_TIMEOUT_MS,
  };
}

export type ProcessSettings = ReturnType<typeof readProcessSettings>;
