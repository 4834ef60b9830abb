import { decodeOwner, encodeOwner, type ResponseOwner, type ResponseOwnerStore } from '../response-types.js';
import type { RedisClient } from './connect.js';
import { guard } from './guard.js';
import type { KeyNames } from './key-names.js';

/** One short string key per stored response, expiring with it. */
export class RedisResponseOwnerStore implements ResponseOwnerStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeyNames,
  ) {}

  async claim(projectId: string, responseId: string, owner: ResponseOwner, ttlMs: number): Promise<void> {
    await guard(this.redis.set(this.keys.responseOwner(projectId, responseId), encodeOwner(owner), 'PX', ttlMs));
  }

  async recordHistory(projectId: string, responseId: string, owner: ResponseOwner): Promise<void> {
    await guard(this.redis.set(this.keys.responseOwner(projectId, responseId), encodeOwner(owner), 'KEEPTTL', 'XX'));
  }

  async get(projectId: string, responseId: string): Promise<ResponseOwner | null> {
    return decodeOwner(await guard(this.redis.get(this.keys.responseOwner(projectId, responseId))));
  }

  async release(projectId: string, responseId: string): Promise<void> {
    await guard(this.redis.del(this.keys.responseOwner(projectId, responseId)));
  }
}
