import { once } from 'node:events';
import { Cluster, Redis, type RedisOptions } from 'ioredis';

export type RedisClient = Redis | Cluster;

export interface RedisConnectOptions {
  url: string;
  mode: 'standalone' | 'cluster';
  commandTimeoutMs: number;
}

/**
 * Fail fast rather than queue: with Redis down or hung a command errors within
 * commandTimeoutMs, so callers can fall back instead of hanging a request.
 */
function baseOptions(commandTimeoutMs: number): RedisOptions {
  return {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    connectTimeout: Math.max(commandTimeoutMs, 2000),
    retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 2000),
  };
}

export function createRedisClient(options: RedisConnectOptions): RedisClient {
  const base = baseOptions(options.commandTimeoutMs);
  if (options.mode === 'cluster') {
    const seeds = options.url.split(',').map((seed) => {
      const url = new URL(seed.trim());
      return { host: url.hostname, port: Number(url.port || 6379) };
    });
    const first = new URL(options.url.split(',')[0]!.trim());
    return new Cluster(seeds, {
      enableOfflineQueue: false,
      scaleReads: 'master',
      clusterRetryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 2000),
      redisOptions: {
        ...base,
        username: first.username || undefined,
        password: first.password ? decodeURIComponent(first.password) : undefined,
        tls: first.protocol === 'rediss:' ? {} : undefined,
      },
    });
  }
  return new Redis(options.url, base);
}

/** Waits for the first connection, up to timeoutMs; returns whether it came. */
export async function waitUntilReady(client: RedisClient, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return true;
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    await once(client, 'ready', { signal: timeout });
    return true;
  } catch {
    return false;
  }
}
