import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { chat, chatConfig, chatEnv } from '../support/chat-fixtures.js';
import { buildTestApp, createProject, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

const BOUND = 1500;
const user = (content: string) => ({ role: 'user', content });

/** conversations.max_bytes_per_project: refused before the upstream call, freed by deletion. */
describe.each(STORE_KINDS)('stored-conversation bound per project (%s store)', (kind) => {
  let upstream: LoopbackUpstream;
  let test: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start();
    const config = chatConfig(upstream);
    test = await buildTestApp(kind, { config: { ...config, conversations: { ...config.conversations, max_bytes_per_project: BOUND } }, deps: { env: chatEnv } });
    project = await createProject(test.app);
  });
  afterAll(async () => {
    await test.close();
    await upstream.close();
  });

  it('refuses store: true at the bound with 429 storage_quota_exceeded, before any upstream call, and deletion makes room', async () => {
    const stored: string[] = [];
    let refused: Awaited<ReturnType<typeof chat>> | undefined;
    for (let i = 0; i < 20 && !refused; i++) {
      const res = await chat(test.app, project.auth, { model: 'fake-1', messages: [user(`message ${i} ${'x'.repeat(200)}`)], store: true });
      if (res.statusCode === 200) stored.push(res.json().conversation_id as string);
      else refused = res;
    }
    expect(stored.length).toBeGreaterThan(1);
    expect(errorOf(refused!)).toMatchObject({ status: 429, type: 'insufficient_quota', code: 'storage_quota_exceeded', param: 'store' });
    expect(refused!.headers['x-should-retry']).toBe('false');
    const calls = upstream.requests.length;
    const again = await chat(test.app, project.auth, { model: 'fake-1', messages: [user(`one more ${'x'.repeat(200)}`)], store: true });
    expect(again.statusCode).toBe(429);
    expect(upstream.requests.length).toBe(calls);

    // Nothing half-written: what is held is exactly the conversations that were stored.
    let sum = 0;
    for (const id of stored) sum += (await test.store.conversations.get(project.projectId, id))!.bytes;
    expect((await test.store.conversations.held(project.projectId, BOUND)).bytes).toBe(sum);

    // Without storing, the project is served as before.
    expect((await chat(test.app, project.auth, { model: 'fake-1', messages: [user('not stored')] })).statusCode).toBe(200);

    const deleted = await test.app.inject({ method: 'DELETE', url: `/v1/conversations/${stored[0]}`, headers: project.auth });
    expect(deleted.statusCode).toBe(200);
    expect((await chat(test.app, project.auth, { model: 'fake-1', messages: [user('room again')], store: true })).statusCode).toBe(200);
  });

  it("uses the project's own bound when the admin set one", async () => {
    const roomy = await createProject(test.app, { name: 'roomy' });
    expect(await test.store.conversations.setMaxBytes(roomy.projectId, 100)).toBe(true);
    const res = await chat(test.app, roomy.auth, { model: 'fake-1', messages: [user('y'.repeat(200))], store: true });
    expect(errorOf(res)).toMatchObject({ status: 429, code: 'storage_quota_exceeded' });
    expect(res.json().error.message).toContain('100 bytes');
  });
});
