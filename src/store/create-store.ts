import { createRedisClient, waitUntilReady } from './redis/connect.js';
import { RedisStore } from './redis/redis-store.js';
import { MemoryStore } from './memory/memory-store.js';
import type { Store } from './types.js';

export interface StoreSettings {
  redisUrl: string | undefined;
  redisMode: 'standalone' | 'cluster';
  commandTimeoutMs: number;
  keyPrefix: string;
  /** How long start-up waits for the first Redis connection before serving not-ready. */
  connectWaitMs?: number;
}

export async function createStore(settings: StoreSettings): Promise<{ store: Store; connected: boolean }> {
  if (settings.redisUrl === undefined) return { store: new MemoryStore(), connected: true };
  const client = createRedisClient({
    url: settings.redisUrl,
    mode: settings.redisMode,
    commandTimeoutMs: settings.commandTimeoutMs,
  });
  client.on('error', () => undefined);
  const connected = await waitUntilReady(client, settings.connectWaitMs ?? 5000);
  return { store: new RedisStore(client, settings.keyPrefix), connected };
}
