import { ConfigError } from './load-config.js';

export interface ProcessSettings {
  host: string;
  port: number;
  metricsPort: number;
  redisUrl: string | undefined;
  redisMode: RedisMode;
  /** REDIS_SENTINEL_MASTER: the master group the sentinels watch (sentinel mode only). */
  redisSentinelMaster: string | undefined;
  /** REDIS_SENTINEL_PASSWORD: the sentinels' own password, when they have one. */
  redisSentinelPassword: string | undefined;
  configPath: string;
  adminToken: string | undefined;
  logLevel: string;
  drainTimeoutMs: number | undefined;
}

export type RedisMode = 'standalone' | 'cluster' | 'sentinel';
const REDIS_MODES: RedisMode[] = ['standalone', 'cluster', 'sentinel'];
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function port(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 65535) {
    throw new ConfigError(`environment variable ${name} must be a port number 0..65535`);
  }
  return value;
}

/** Reads the environment variables of DESIGN.md section 2; a bad value names the variable. */
export function readProcessSettings(env: NodeJS.ProcessEnv = process.env): ProcessSettings {
  const redisUrl = env.REDIS_URL || undefined;
  const redisMode = (env.REDIS_MODE || 'standalone') as RedisMode;
  if (!REDIS_MODES.includes(redisMode)) {
    throw new ConfigError('environment variable REDIS_MODE must be "standalone", "cluster" or "sentinel"');
  }
  const redisSentinelMaster = env.REDIS_SENTINEL_MASTER || undefined;
  if (redisMode === 'sentinel' && (redisUrl === undefined || redisSentinelMaster === undefined)) {
    throw new ConfigError(
      'REDIS_MODE=sentinel needs REDIS_URL (the sentinels, e.g. redis://sentinel-0:26379,redis://sentinel-1:26379) and REDIS_SENTINEL_MASTER (the master group name)',
    );
  }
  if (redisUrl !== undefined) {
    for (const url of redisUrl.split(',')) {
      if (!/^rediss?:\/\/./.test(url.trim())) {
        throw new ConfigError('environment variable REDIS_URL must be a redis:// or rediss:// URL');
      }
    }
  }
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`environment variable LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const adminToken = env.NOVA_ADMIN_TOKEN || undefined;
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new ConfigError('environment variable NOVA_ADMIN_TOKEN must be at least 16 characters');
  }
  let drainTimeoutMs: number | undefined;
  if (env.NOVA_DRAIN_TIMEOUT_MS) {
    drainTimeoutMs = Number(env.NOVA_DRAIN_TIMEOUT_MS);
    if (!Number.isInteger(drainTimeoutMs) || drainTimeoutMs < 0) {
      throw new ConfigError('environment variable NOVA_DRAIN_TIMEOUT_MS must be a whole number of milliseconds');
    }
  }
  return {
    host: env.HOST || '0.0.0.0',
    port: port(env, 'PORT', 8080),
    metricsPort: port(env, 'METRICS_PORT', 9464),
    redisUrl,
    redisMode,
    redisSentinelMaster,
    redisSentinelPassword: env.REDIS_SENTINEL_PASSWORD || undefined,
    configPath: env.NOVA_CONFIG || 'config/gateway.yaml',
    adminToken,
    logLevel,
    drainTimeoutMs,
  };
}
