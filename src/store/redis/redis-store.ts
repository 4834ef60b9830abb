import { RedisResponseOwnerStore } from './response-owners.js';
import { Cluster } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';
import type { AuditStore, InvalidationBus, LimiterOptions, Store } from '../types.js';
import { RedisApiKeyStore } from './api-keys.js';
import { RedisConversationStore } from './conversations.js';
import type { RedisClient } from './connect.js';
import { guard } from './guard.js';
import { KeyNames } from './key-names.js';
import { RedisProjectStore } from './projects.js';
import { RedisRecordStore } from './records-store.js';
import { RedisQuotaStore } from './redis-quota-store.js';
import { RedisUsageStore } from './usage.js';
import { auditFromFields } from './hash-codecs.js';
import { RedisAlertStore } from './alerts.js';

export class RedisStore implements Store {
  readonly kind = 'redis' as const;
  readonly projects: RedisProjectStore;
  readonly apiKeys: RedisApiKeyStore;
  readonly audit: AuditStore;
  readonly invalidation: InvalidationBus;
  readonly quota: RedisQuotaStore;
  readonly usage: RedisUsageStore;
  readonly conversations: RedisConversationStore;
  readonly records: RedisRecordStore;
  readonly responses: RedisResponseOwnerStore;
  readonly alerts: RedisAlertStore;
  private readonly keys: KeyNames;
  private subscriber: RedisClient | null = null;

  constructor(
    private readonly redis: RedisClient,
    prefix = 'nova',
  ) {
    this.keys = new KeyNames(prefix);
    this.apiKeys = new RedisApiKeyStore(redis, this.keys);
    this.projects = new RedisProjectStore(redis, this.keys, this.apiKeys);
    this.alerts = new RedisAlertStore(redis, prefix, this.keys);
    this.quota = new RedisQuotaStore(redis, this.keys, this.alerts);
    this.usage = new RedisUsageStore(redis, this.keys);
    this.conversations = new RedisConversationStore(redis, this.keys);
    this.records = new RedisRecordStore(redis, this.keys);
    this.responses = new RedisResponseOwnerStore(redis, this.keys);
    this.audit = {
      list: async (projectId, limit) => {
        const entries = await guard(this.redis.xrevrange(this.keys.audit(projectId), '+', '-', 'COUNT', limit));
        return entries.map(([, fields]) => auditFromFields(fields));
      },
    };
    this.invalidation = {
      publish: async (hashes) => {
        await guard(this.redis.publish(this.keys.invalidationChannel(), JSON.stringify(hashes)));
      },
      subscribe: (onHashes, onReset) => this.subscribe(onHashes, onReset),
    };
  }

  private subscribe(onHashes: (hashes: string[]) => void, onReset: () => void): void {
    // The subscriber may queue its SUBSCRIBE until connected: it carries no request traffic.
    const subscriber =
      this.subscriber ??
      (this.subscriber =
        this.redis instanceof Cluster
          ? this.redis.duplicate([], { enableOfflineQueue: true })
          : this.redis.duplicate({ enableOfflineQueue: true }));
    const channel = this.keys.invalidationChannel();
    let connectedBefore = subscriber.status === 'ready';
    // ioredis resubscribes after a reconnect; whatever was published meanwhile is lost.
    subscriber.on('ready', () => {
      if (connectedBefore) onReset();
      connectedBefore = true;
    });
    subscriber.on('error', () => undefined);
    subscriber.on('message', (from: string, message: string) => {
      if (from !== channel) return;
      try {
        onHashes(JSON.parse(message) as string[]);
      } catch {
        onReset();
      }
    });
    subscriber.subscribe(channel).catch(() => onReset());
  }

  createLimiter(options: LimiterOptions) {
    const common = {
      points: options.points,
      duration: options.durationSeconds,
      blockDuration: options.blockDurationSeconds ?? 0,
    };
    return new RateLimiterRedis({
      ...common,
      storeClient: this.redis,
      useRedisPackage: false,
      keyPrefix: this.keys.limiter(options.keyPrefix),
      // With Redis unreachable each replica keeps limiting on its own.
      insuranceLimiter: new RateLimiterMemory({ ...common, keyPrefix: options.keyPrefix }),
    });
  }

  async ping(): Promise<void> {
    await guard(this.redis.ping());
  }

  async close(): Promise<void> {
    this.subscriber?.disconnect();
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
