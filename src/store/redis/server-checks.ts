import { Cluster, type Redis } from 'ioredis';
import type { RedisClient } from './connect.js';

/** SET … PXAT (key cache entries bounded by an absolute expiry) needs 6.2. */
export const MIN_REDIS_VERSION = [6, 2] as const;

export interface ServerFacts {
  version: string;
  maxmemoryPolicy: string | undefined;
  appendonly: boolean | undefined;
  /** The RDB `save` schedule; "" = snapshots off; undefined = CONFIG is not allowed (managed Redis). */
  save: string | undefined;
}

function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*)$`, 'm').exec(info)?.[1]?.trim();
}

async function configGet(node: Redis, name: string): Promise<string | undefined> {
  try {
    const reply = (await node.call('CONFIG', 'GET', name)) as string[];
    return reply[1];
  } catch {
    return undefined; // CONFIG renamed or refused (managed services): fall back to INFO
  }
}

/** Version, eviction policy and persistence of one node, from INFO and (when allowed) CONFIG GET. */
export async function readServerFacts(node: Redis): Promise<ServerFacts> {
  const info = (await node.info()) as string;
  const appendonly = (await configGet(node, 'appendonly')) ?? infoField(info, 'aof_enabled');
  return {
    version: infoField(info, 'redis_version') ?? 'unknown',
    maxmemoryPolicy: (await configGet(node, 'maxmemory-policy')) ?? infoField(info, 'maxmemory_policy'),
    appendonly: appendonly === undefined ? undefined : appendonly === 'yes' || appendonly === '1',
    save: await configGet(node, 'save'),
  };
}

function olderThanMinimum(version: string): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major < MIN_REDIS_VERSION[0] || (major === MIN_REDIS_VERSION[0] && minor < MIN_REDIS_VERSION[1]);
}

/**
 * What an operator must change, one line each, naming the Redis setting: an evicting
 * maxmemory-policy silently deletes API keys and projects; no persistence loses them all on a
 * restart. Advice (AOF over RDB alone) comes back as `notes`.
 */
export function judgeServer(facts: ServerFacts): { warnings: string[]; notes: string[] } {
  const warnings: string[] = [];
  const notes: string[] = [];
  if (olderThanMinimum(facts.version)) {
    warnings.push(`Redis ${facts.version} is older than ${MIN_REDIS_VERSION.join('.')}, the oldest version nova-gateway supports: upgrade Redis`);
  }
  if (facts.maxmemoryPolicy !== undefined && facts.maxmemoryPolicy !== 'noeviction') {
    warnings.push(
      `Redis maxmemory-policy is ${facts.maxmemoryPolicy}: when memory runs out Redis evicts keys, including API keys and projects; set maxmemory-policy noeviction`,
    );
  }
  if (facts.appendonly === false && facts.save === '') {
    warnings.push('Redis persistence is off (appendonly no, save ""): a Redis restart loses every project and API key; set appendonly yes');
  } else if (facts.appendonly === false) {
    notes.push('Redis persistence is RDB snapshots only (appendonly no): a crash loses what changed since the last snapshot; appendonly yes is recommended');
  }
  return { warnings, notes };
}

/** The nodes that hold data: the one master, or every master of a cluster. */
export function dataNodes(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}
