import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { mintId } from '../../src/core/ids.js';
import { storedBytes, type ConversationAppend, type MessageRecord } from '../../src/store/conversation-types.js';
import type { Store } from '../../src/store/types.js';
import { createQuotaStore, QUOTA_STORE_KINDS } from '../support/quota-stores.js';
import { RedisCluster } from '../support/redis-cluster.js';

const message = (role: MessageRecord['role'], content: MessageRecord['content']): MessageRecord => ({
  id: mintId('msg'),
  role,
  content,
  created_at: new Date().toISOString(),
});

describe.each(QUOTA_STORE_KINDS)('conversation store contract (%s)', (kind) => {
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  let store: Store;
  const projectId = mintId('proj');
  const append = (overrides: Partial<ConversationAppend>): ConversationAppend => ({
    projectId,
    conversationId: mintId('conv'),
    model: 'm',
    existing: false,
    messages: [],
    nowMs: Date.now(),
    retentionSeconds: 3600,
    ...overrides,
  });

  beforeEach(async () => {
    store = await createQuotaStore(kind, cluster);
  });
  afterEach(() => store.close());

  it('appends in order, counts messages and bytes, pages after a message id', async () => {
    const id = mintId('conv');
    const first = [message('system', 'sys'), message('user', [{ type: 'text', text: 'hi' }]), message('assistant', 'hello')];
    const created = await store.conversations.append(append({ conversationId: id, messages: first }));
    expect(created).toMatchObject({ id, project_id: projectId, model: 'm', message_count: 3, bytes: storedBytes(first) });
    const more = [message('user', 'again'), message('assistant', 'sure')];
    const updated = await store.conversations.append(append({ conversationId: id, messages: more, existing: true, model: 'm2' }));
    expect(updated).toMatchObject({ message_count: 5, model: 'm2', created_at: created!.created_at });
    const all = [...first, ...more];
    const page1 = await store.conversations.messages(projectId, id, null, 2);
    expect(page1).toEqual({ data: all.slice(0, 2), hasMore: true });
    const page2 = await store.conversations.messages(projectId, id, page1!.data[1]!.id, 2);
    expect(page2).toEqual({ data: all.slice(2, 4), hasMore: true });
    const page3 = await store.conversations.messages(projectId, id, page2!.data[1]!.id, 2);
    expect(page3).toEqual({ data: all.slice(4), hasMore: false });
    expect(await store.conversations.messages(projectId, id, mintId('msg'), 2)).toBeNull();
  });

  it('keeps each append of one event-loop turn apart (one pipeline on Redis): its own record, its order, its refusal', async () => {
    const id = mintId('conv');
    const other = mintId('proj');
    // Started and continued in the same turn, beside 130 others (more than one pipeline holds),
    // one of another project and one that continues a conversation that does not exist.
    const [started, continued, missing, foreign, ...rest] = await Promise.all([
      store.conversations.append(append({ conversationId: id, messages: [message('user', 'one')] })),
      store.conversations.append(append({ conversationId: id, messages: [message('assistant', 'two'), message('user', 'three')], existing: true, model: 'm2' })),
      store.conversations.append(append({ existing: true, messages: [message('user', 'lost')] })),
      store.conversations.append(append({ projectId: other, messages: [message('user', 'elsewhere')] })),
      ...Array.from({ length: 130 }, (_, i) => store.conversations.append(append({ messages: [message('user', 'x'.repeat(i + 1))] }))),
    ]);
    expect(started).toMatchObject({ id, message_count: 1, model: 'm' });
    expect(continued).toMatchObject({ id, message_count: 3, model: 'm2' });
    expect(missing).toBeNull();
    expect(foreign).toMatchObject({ project_id: other, message_count: 1 });
    expect(rest.map((record) => record!.bytes)).toEqual(Array.from({ length: 130 }, (_, i) => storedBytes([message('user', 'x'.repeat(i + 1))])));
    const page = await store.conversations.messages(projectId, id, null, 10);
    expect(page!.data.map((m) => m.content)).toEqual(['one', 'two', 'three']);
  });

  it('scopes conversations by project and refuses to continue one that does not exist', async () => {
    const id = mintId('conv');
    await store.conversations.append(append({ conversationId: id, messages: [message('user', 'x')] }));
    expect(await store.conversations.get(mintId('proj'), id)).toBeNull();
    expect(await store.conversations.append(append({ existing: true, messages: [message('user', 'x')] }))).toBeNull();
  });

  it('forgets a conversation after its retention', async () => {
    const id = mintId('conv');
    const saved = await store.conversations.append(append({ conversationId: id, messages: [message('user', 'x')], retentionSeconds: 1 }));
    expect(Date.parse(saved!.expires_at)).toBeLessThanOrEqual(Date.now() + 1000);
    await sleep(1100);
    expect(await store.conversations.get(projectId, id)).toBeNull();
  });

  it('counts the bytes a project holds: appends add, a deletion and an expiry free them, exactly', async () => {
    const owner = mintId('proj');
    const kept = await store.conversations.append(append({ projectId: owner, messages: [message('user', 'k'.repeat(200))] }));
    const gone = await store.conversations.append(append({ projectId: owner, messages: [message('user', 'g'.repeat(300))] }));
    const short = await store.conversations.append(append({ projectId: owner, messages: [message('user', 's'.repeat(400))], retentionSeconds: 1 }));
    expect(await store.conversations.held(owner, 5000)).toEqual({ bytes: kept!.bytes + gone!.bytes + short!.bytes, maxBytes: 5000 });
    expect(await store.conversations.delete(owner, gone!.id)).toBe(gone!.bytes);
    expect((await store.conversations.held(owner, 5000)).bytes).toBe(kept!.bytes + short!.bytes);
    await sleep(1100);
    expect((await store.conversations.held(owner, 5000)).bytes).toBe(kept!.bytes);
    expect((await store.conversations.held(mintId('proj'), 5000)).bytes).toBe(0);
  });

  if (kind !== 'memory') it('reads what a project holds once per event-loop turn: the callers of a turn share the read', async () => {
    const owner = mintId('proj');
    const first = store.conversations.held(owner, 5000);
    const same = store.conversations.held(owner, 5000);
    const otherBound = store.conversations.held(owner, 6000);
    expect(same).toBe(first);
    expect(otherBound).not.toBe(first);
    expect(await first).toEqual({ bytes: 0, maxBytes: 5000 });
    const kept = await store.conversations.append(append({ projectId: owner, messages: [message('user', 'k'.repeat(200))] }));
    // A later turn reads again and sees the write.
    const next = store.conversations.held(owner, 5000);
    expect(next).not.toBe(first);
    expect(await next).toEqual({ bytes: kept!.bytes, maxBytes: 5000 });
  });

  it('keeps a per-project bound for projects that exist only', async () => {
    expect(await store.conversations.setMaxBytes(mintId('proj'), 10)).toBe(false);
  });
});
