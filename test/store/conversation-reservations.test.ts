import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { mintId, randomBase62 } from '../../src/core/ids.js';
import { storedBytes, type ConversationAppend, type MessageRecord } from '../../src/store/conversation-types.js';
import { createRedisClient, waitUntilReady, type RedisClient } from '../../src/store/redis/connect.js';
import { RedisConversationStore } from '../../src/store/redis/conversations.js';
import { KeyNames } from '../../src/store/redis/key-names.js';
import type { Store } from '../../src/store/types.js';
import { createQuotaStore, QUOTA_STORE_KINDS } from '../support/quota-stores.js';
import { RedisCluster } from '../support/redis-cluster.js';

const HOUR = 3_600_000;
const message = (role: string, content: string): MessageRecord => ({ id: mintId('msg'), role, content, created_at: new Date().toISOString() });
const reservation = (bytes: number, ttlMs = HOUR) => ({ id: randomBase62(20), bytes, ttlMs });

async function until(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(20);
  }
}

/** ConversationStore.reserve / release and the append's conversion (chat-conversation.ts reserveRoom). */
describe.each(QUOTA_STORE_KINDS)('conversation bound reservations (%s)', (kind) => {
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  let store: Store;
  beforeEach(async () => {
    store = await createQuotaStore(kind, cluster);
  });
  afterEach(() => store.close());

  const append = (projectId: string, overrides: Partial<ConversationAppend>): ConversationAppend => ({
    projectId,
    conversationId: mintId('conv'),
    model: 'm',
    existing: false,
    messages: [],
    nowMs: Date.now(),
    retentionSeconds: 3600,
    ...overrides,
  });

  it('reserves only within the bound, and 40 at once get exactly the room there is', async () => {
    const projectId = mintId('proj');
    expect(await store.conversations.reserve(projectId, reservation(600), 1000)).toEqual({ reserved: true, bytes: 600, maxBytes: 1000 });
    expect(await store.conversations.reserve(projectId, reservation(401), 1000)).toEqual({ reserved: false, bytes: 600, maxBytes: 1000 });
    expect(await store.conversations.reserve(projectId, reservation(400), 1000)).toEqual({ reserved: true, bytes: 1000, maxBytes: 1000 });
    expect(await store.conversations.held(projectId, 1000)).toEqual({ bytes: 1000, maxBytes: 1000 });

    const crowded = mintId('proj');
    const answers = await Promise.all(Array.from({ length: 40 }, () => store.conversations.reserve(crowded, reservation(300), 1000)));
    expect(answers.filter((answer) => answer.reserved)).toHaveLength(3);
    expect((await store.conversations.held(crowded, 1000)).bytes).toBe(900);
  });

  it('turns a reservation into the stored size, reply included even past the bound, and the next is refused', async () => {
    const projectId = mintId('proj');
    const room = reservation(300);
    expect((await store.conversations.reserve(projectId, room, 1000)).reserved).toBe(true);
    const messages = [message('user', 'u'.repeat(200)), message('assistant', 'a'.repeat(1200))];
    const record = await store.conversations.append(append(projectId, { messages, reservationId: room.id }));
    expect(record!.bytes).toBe(storedBytes(messages));
    expect(await store.conversations.held(projectId, 1000)).toEqual({ bytes: storedBytes(messages), maxBytes: 1000 });
    expect(await store.conversations.reserve(projectId, reservation(1), 1000)).toMatchObject({ reserved: false, bytes: storedBytes(messages) });
    // Converted once: giving it back afterwards, or converting it again, changes nothing.
    await store.conversations.release(projectId, room.id);
    expect((await store.conversations.held(projectId, 1000)).bytes).toBe(storedBytes(messages));
  });

  it('gives a reservation back once, however often it is released, and never below zero', async () => {
    const projectId = mintId('proj');
    const rooms = [reservation(300), reservation(200)];
    for (const room of rooms) expect((await store.conversations.reserve(projectId, room, 1000)).reserved).toBe(true);
    await Promise.all([store.conversations.release(projectId, rooms[0]!.id), store.conversations.release(projectId, rooms[0]!.id)]);
    expect((await store.conversations.held(projectId, 1000)).bytes).toBe(200);
    await store.conversations.release(projectId, rooms[1]!.id);
    await store.conversations.release(projectId, rooms[1]!.id);
    await store.conversations.release(projectId, 'never-reserved');
    expect((await store.conversations.held(projectId, 1000)).bytes).toBe(0);
    expect(await store.conversations.reserve(projectId, reservation(1000), 1000)).toEqual({ reserved: true, bytes: 1000, maxBytes: 1000 });
  });

  it('gives the reservation back when the conversation it continues is gone', async () => {
    const projectId = mintId('proj');
    const room = reservation(300);
    await store.conversations.reserve(projectId, room, 1000);
    expect(await store.conversations.append(append(projectId, { existing: true, messages: [message('user', 'x')], reservationId: room.id }))).toBeNull();
    expect((await store.conversations.held(projectId, 1000)).bytes).toBe(0);
  });

  it('lets a reservation nobody converts or gives back lapse after its time to live', async () => {
    const projectId = mintId('proj');
    await store.conversations.reserve(projectId, reservation(300, 50), 1000);
    await store.conversations.reserve(projectId, reservation(200), 1000);
    await until(async () => (await store.conversations.held(projectId, 1000)).bytes === 200);
    expect(await store.conversations.reserve(projectId, reservation(800), 1000)).toEqual({ reserved: true, bytes: 1000, maxBytes: 1000 });
  });
});

describe('conversation bytes held when the storage index has expired (redis)', () => {
  let client: RedisClient;
  let store: RedisConversationStore;
  const keys = new KeyNames(`t${randomBase62(10)}`);
  beforeAll(async () => {
    client = createRedisClient({ url: inject('redisUrl'), mode: 'standalone', commandTimeoutMs: 2000 });
    client.on('error', () => undefined);
    await waitUntilReady(client, 5000);
    store = new RedisConversationStore(client, keys);
  });
  afterAll(() => client.quit());

  it('counts the live reservations alone once the expiry index and sizes are gone with what they held', async () => {
    const projectId = mintId('proj');
    const messages = [message('user', 'k'.repeat(300))];
    const conversationId = mintId('conv');
    await store.append({ projectId, conversationId, model: 'm', existing: false, messages, nowMs: Date.now(), retentionSeconds: 3600 });
    await store.reserve(projectId, reservation(100), 5000);
    expect((await store.held(projectId, 5000)).bytes).toBe(storedBytes(messages) + 100);
    // What Redis does a day after the project's last write (append-conversation.lua sets these TTLs),
    // by when every conversation counted in them has expired: without a reconcile in that day, their
    // bytes stayed in held for ever.
    await client.del(
      keys.usageStorageExpiry(projectId),
      keys.usageStorageSizes(projectId),
      keys.conversation(projectId, conversationId),
      keys.conversationMessages(projectId, conversationId),
      keys.conversationPositions(projectId, conversationId),
    );
    expect((await store.held(projectId, 5000)).bytes).toBe(100);
    expect(await store.reserve(projectId, reservation(4900), 5000)).toEqual({ reserved: true, bytes: 5000, maxBytes: 5000 });
  });
});
