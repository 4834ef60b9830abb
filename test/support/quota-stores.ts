import { inject } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/connect.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { Store } from '../../src/store/types.js';
import { createTestStore } from './test-app.js';
import type { RedisCluster } from './redis-cluster.js';

/** The quota and usage contract runs on all three: one process, standalone Redis, a 3-master Cluster. */
export type QuotaStoreKind = 'memory' | 'redis' | 'cluster';
export const QUOTA_STORE_KINDS: QuotaStoreKind[] = ['memory', 'redis', 'cluster'];

export async function createClusterStore(cluster: RedisCluster, prefix = `t${randomBase62(10)}`): Promise<Store> {
  const client = createRedisClient({ url: cluster.url, mode: 'cluster', commandTimeoutMs: 2000 });
  client.on('error', () => undefined);
  if (!(await waitUntilReady(client, 10_000))) throw new Error('cluster client not ready');
  return new RedisStore(client, prefix);
}

export async function createQuotaStore(kind: QuotaStoreKind, cluster?: RedisCluster, prefix?: string): Promise<Store> {
  if (kind === 'cluster') return createClusterStore(cluster!, prefix);
  return createTestStore(kind, { prefix, url: kind === 'redis' ? inject('redisUrl') : undefined });
}
