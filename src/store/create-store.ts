import { Cluster } from 'ioredis';
import { createRedisClient, describeRedisTarget, waitUntilReady, type RedisClient, type RedisConnectOptions } from './redis/connect.js';
import { dataNodes, judgeServer, readServerFacts } from './redis/server-checks.js';
import { RedisStore } from './redis/redis-store.js';
import { MemoryStore } from './memory/memory-store.js';
import { StoreHealth, type HealthLog } from './store-health.js';
import type { Store } from './types.js';

export interface StoreSettings {
  redisUrl: string | undefined;
  redisMode: RedisConnectOptions['mode'];
  redisSentinelMaster?: string;
  redisSentinelPassword?: string;
  commandTimeoutMs: number;
  keyPrefix: string;
  /** How long start-up waits for the first Redis connection before serving not-ready. */
  connectWaitMs?: number;
}

export interface OpenedStore {
  store: Store;
  connected: boolean;
  health: StoreHealth;
}

/** host:port of the node a standalone or Sentinel client talks to now. */
function connectedAddress(client: RedisClient): string | undefined {
  if (client instanceof Cluster) return undefined;
  const stream = client.stream as { remoteAddress?: string; remotePort?: number } | undefined;
  return stream?.remoteAddress && stream.remotePort ? `${stream.remoteAddress}:${stream.remotePort}` : undefined;
}

/**
 * Checks the server's version, eviction policy and persistence each time the store is reached
 * at a new address (start-up, a Sentinel failover): one warn line per problem. A check that
 * fails (a command timing out right after connecting) is retried a few times, a second apart.
 */
function checkServerOnConnect(client: RedisClient, health: StoreHealth, log: HealthLog): void {
  let checked: string | undefined;
  const check = (where: string, attemptsLeft: number) => {
    if (checked !== where || !health.reachable) return;
    void Promise.all(dataNodes(client).map(readServerFacts)).then(
      (all) => {
        const warnings = new Set(all.flatMap((facts) => judgeServer(facts).warnings));
        for (const line of warnings) log.warn({ store_check: true }, line);
        for (const line of new Set(all.flatMap((facts) => judgeServer(facts).notes))) log.info({ store_check: true }, line);
        if (warnings.size === 0) log.info({ store_check: true, redis: all }, 'Redis settings checked: version, maxmemory-policy and persistence are fit for keys and limits');
      },
      () => {
        if (attemptsLeft > 0) setTimeout(() => check(where, attemptsLeft - 1), 1000).unref();
        else checked = undefined;
      },
    );
  };
  health.on('up', (address: string | undefined) => {
    const where = address ?? 'cluster';
    if (checked === where) return;
    checked = where;
    check(where, 5);
  });
}

export async function createStore(settings: StoreSettings, log: HealthLog): Promise<OpenedStore> {
  if (settings.redisUrl === undefined) {
    const store = new MemoryStore();
    const health = new StoreHealth({ target: 'memory', ping: () => store.ping(), log });
    health.begin(true);
    return { store, connected: true, health };
  }
  const connect: RedisConnectOptions = {
    url: settings.redisUrl,
    mode: settings.redisMode,
    commandTimeoutMs: settings.commandTimeoutMs,
    sentinelMaster: settings.redisSentinelMaster,
    sentinelPassword: settings.redisSentinelPassword,
  };
  const client = createRedisClient(connect);
  const store = new RedisStore(client, settings.keyPrefix);
  const health = new StoreHealth({
    target: describeRedisTarget(connect),
    ping: () => store.ping(),
    address: () => connectedAddress(client),
    log,
  }).watch(client);
  checkServerOnConnect(client, health, log);
  const connected = await waitUntilReady(client, settings.connectWaitMs ?? 5000);
  health.begin(connected || client.status === 'ready');
  return { store, connected, health };
}
