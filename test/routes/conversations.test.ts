import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildTestApp, createProject, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { chat, chatConfig, chatEnv, RecordingUsageMeter } from '../support/chat-fixtures.js';

const user = (content: string) => ({ role: 'user', content });

describe.each(STORE_KINDS)('conversations (%s store)', (kind) => {
  let upstream: LoopbackUpstream;
  let test: TestApp;
  let alice: TestProject;
  let bob: TestProject;
  let usage: RecordingUsageMeter;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start();
    usage = new RecordingUsageMeter();
    test = await buildTestApp(kind, { config: chatConfig(upstream), deps: { usage, env: chatEnv } });
    alice = await createProject(test.app, { name: 'alice' });
    bob = await createProject(test.app, { name: 'bob' });
  });
  afterAll(async () => {
    await test.close();
    await upstream.close();
  });
  beforeEach(() => {
    upstream.requests.length = 0;
  });

  const getConversation = (project: TestProject, id: string, query = '') =>
    test.app.inject({ url: `/v1/conversations/${id}${query}`, headers: project.auth });

  it('stores each exchange, continues a conversation with its history sent upstream first, and pages the messages', async () => {
    const first = await chat(test.app, alice.auth, { model: 'fake-1', messages: [{ role: 'system', content: 'Be brief.' }, user('Hi')], store: true });
    const conversationId = first.json().conversation_id as string;
    expect(conversationId).toMatch(/^conv_/);

    const second = await chat(test.app, alice.auth, { model: 'fake-1', messages: [user('And then?')], conversation_id: conversationId, stream: true });
    expect(second.headers['x-conversation-id']).toBe(conversationId);
    expect(upstream.requests[1]!.body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      user('Hi'),
      { role: 'assistant', content: 'Hello from the fake upstream.' },
      user('And then?'),
    ]);
    expect(upstream.requests[1]!.body).not.toHaveProperty('conversation_id');

    const meta = await getConversation(alice, conversationId);
    expect(meta.statusCode).toBe(200);
    expect(meta.json()).toMatchObject({
      id: conversationId,
      object: 'nova.resource',
      status: 'succeeded',
      project_id: alice.projectId,
      model: 'fake-1',
      message_count: 5,
    });
    expect(meta.json()).not.toHaveProperty('messages');
    expect(Date.parse(meta.json().expires_at)).toBeGreaterThan(Date.now() + 29 * 86_400_000);

    const seen: Array<{ role: string; content: unknown }> = [];
    let after = '';
    for (let page = 0; page < 5; page++) {
      const res = await getConversation(alice, conversationId, `?include_messages=true&limit=2${after ? `&after=${after}` : ''}`);
      expect(res.statusCode).toBe(200);
      const body = res.json();
      seen.push(...body.messages.map((message: { role: string; content: unknown; id: string }) => ({ role: message.role, content: message.content })));
      expect(body.messages.every((message: { id: string }) => /^msg_/.test(message.id))).toBe(true);
      if (!body.has_more) {
        expect(body.next_cursor).toBeNull();
        break;
      }
      after = body.next_cursor;
    }
    expect(seen).toEqual([
      { role: 'system', content: 'Be brief.' },
      user('Hi'),
      { role: 'assistant', content: 'Hello from the fake upstream.' },
      user('And then?'),
      { role: 'assistant', content: 'Hello from the fake upstream.' },
    ]);
  });

  it("keeps projects apart: another project's conversation is a 404, to read and to continue", async () => {
    const res = await chat(test.app, alice.auth, { model: 'fake-1', messages: [user('secret plans')], store: true });
    const conversationId = res.json().conversation_id as string;
    expect(errorOf(await getConversation(bob, conversationId))).toMatchObject({ status: 404, code: 'resource_not_found' });
    const hijack = await chat(test.app, bob.auth, { model: 'fake-1', messages: [user('x')], conversation_id: conversationId });
    expect(errorOf(hijack)).toMatchObject({ status: 404, code: 'resource_not_found', param: 'conversation_id' });
    expect(upstream.requests).toHaveLength(1);
    expect(errorOf(await getConversation(alice, 'conv_doesnotexist000000'))).toMatchObject({ status: 404 });
  });

  it('store: false stores nothing and meters no storage', async () => {
    const res = await chat(test.app, alice.auth, { model: 'fake-1', messages: [user('forget me')], store: false }, { 'x-request-id': `req-nostore-${kind}` });
    expect(res.json().conversation_id).toBeNull();
    expect(upstream.requests[0]!.body).not.toHaveProperty('store');
    expect(usage.of(`req-nostore-${kind}`)).toEqual([expect.objectContaining({ storageBytesDelta: 0, completionTokens: 5 })]);
    const streamed = await chat(test.app, alice.auth, { model: 'fake-1', messages: [user('forget me')], store: false, stream: true });
    expect(streamed.headers['x-conversation-id']).toBeUndefined();
  });

  it('refuses an `after` that is not a message of the conversation', async () => {
    const res = await chat(test.app, alice.auth, { model: 'fake-1', messages: [user('x')], store: true });
    const id = res.json().conversation_id as string;
    const bad = await getConversation(alice, id, '?include_messages=true&after=msg_0000000000000000000000');
    expect(errorOf(bad)).toMatchObject({ status: 400, code: 'invalid_parameter', param: 'after' });
  });
});
