import { once } from 'node:events';
import { Cluster, Redis, type RedisOptions } from 'ioredis';

export type RedisClient = Redis | Cluster;

export interface RedisConnectOptions {
  /** One URL (standalone), or a comma-separated list: cluster seed nodes, or the sentinels. */
  url: string;
  mode: 'standalone' | 'cluster' | 'sentinel';
  commandTimeoutMs: number;
  /** Sentinel mode: the master group name the sentinels watch. */
  sentinelMaster?: string;
  /** Sentinel mode: the sentinels' password (the URL's credentials are the master's). */
  sentinelPassword?: string;
}

interface Endpoint {
  host: string;
  port: number;
}

/**
 * Fail fast rather than queue: with Redis down or hung a command errors within
 * commandTimeoutMs, so callers can fall back instead of hanging a request.
 * No auto-pipelining: it keeps one pipeline in flight per connection and holds the next commands,
 * unsent and with no timeout running, until that one is answered, so with Redis hung a request could
 * wait several timeouts. The quota batch script already sends one call per project and turn.
 */
function baseOptions(commandTimeoutMs: number): RedisOptions {
  return {
    enableOfflineQueue: false,
    enableAutoPipelining: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    connectTimeout: Math.max(commandTimeoutMs, 2000),
    retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 2000),
  };
}

function urlsOf(list: string): URL[] {
  return list.split(',').map((entry) => new URL(entry.trim()));
}

function endpointsOf(list: string, defaultPort: number): Endpoint[] {
  return urlsOf(list).map((url) => ({ host: url.hostname, port: Number(url.port || defaultPort) }));
}

/** Credentials and TLS of the first URL of a list (cluster seeds, sentinels). */
function authOf(url: URL): Pick<RedisOptions, 'username' | 'password' | 'tls'> {
  return {
    username: url.username ? decodeURIComponent(url.username) : undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
    tls: url.protocol === 'rediss:' ? {} : undefined,
  };
}

/** Where the store lives, for log lines: host:port list, never credentials. */
export function describeRedisTarget(options: Pick<RedisConnectOptions, 'url' | 'mode' | 'sentinelMaster'>): string {
  const defaultPort = options.mode === 'sentinel' ? 26379 : 6379;
  const hosts = endpointsOf(options.url, defaultPort).map(({ host, port }) => `${host}:${port}`).join(',');
  if (options.mode === 'sentinel') return `master "${options.sentinelMaster}" via sentinels ${hosts}`;
  if (options.mode === 'cluster') return `cluster ${hosts}`;
  return hosts;
}

/**
 * Runs `send`, which issues commands, with the connection's socket corked, so that they leave in
 * one write (one system call) instead of one each; each command keeps its own reply, error and
 * timeout. On Cluster the commands go to their nodes' connections as usual.
 */
export function inOneWrite(client: RedisClient, send: () => void): void {
  const socket = client instanceof Redis && client.stream?.writable ? client.stream : undefined;
  socket?.cork();
  try {
    send();
  } finally {
    socket?.uncork();
  }
}

export function createRedisClient(options: RedisConnectOptions): RedisClient {
  const base = baseOptions(options.commandTimeoutMs);
  if (options.mode === 'cluster') {
    return new Cluster(endpointsOf(options.url, 6379), {
      enableOfflineQueue: false,
      scaleReads: 'master',
      clusterRetryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 2000),
      redisOptions: { ...base, ...authOf(urlsOf(options.url)[0]!) },
    });
  }
  if (options.mode === 'sentinel') {
    const first = urlsOf(options.url)[0]!;
    const tls = first.protocol === 'rediss:';
    return new Redis({
      ...base,
      ...authOf(first),
      sentinels: endpointsOf(options.url, 26379),
      name: options.sentinelMaster,
      sentinelPassword: options.sentinelPassword,
      enableTLSForSentinelMode: tls,
      sentinelTLS: tls ? {} : undefined,
      // Sentinel retries forever (the master may be mid-failover), at the pace of the normal strategy.
      sentinelRetryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 2000),
      // Subscribes to +switch-master, so a failover is followed before the old master's socket times out.
      failoverDetector: true,
      // A demoted master answers READONLY: reconnect through the sentinels to the new one.
      reconnectOnError: (error) => error.message.startsWith('READONLY'),
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
