import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, buildTestApp, createProject, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { chat, chatConfig, chatEnv } from '../support/chat-fixtures.js';

/**
 * `priority_param: true` sends the request's queue priority to vLLM as its `priority` field (lower is
 * sooner): the key's own, else its project's as admission read it with the policy (quota-batch.lua on Redis).
 */
describe.each(STORE_KINDS)('priority_param (%s store)', (kind) => {
  let upstream: LoopbackUpstream;
  let t: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({ vllm: {}, plain: {} });
    const models = [
      { id: 'vllm-1', targets: [{ upstream: upstream.baseUrl('vllm') }], priority_param: true },
      { id: 'plain-1', upstream: upstream.baseUrl('plain') },
    ];
    t = await buildTestApp(kind, { config: chatConfig(upstream, models), deps: { env: chatEnv } });
    project = await createProject(t.app);
  });
  afterAll(async () => {
    await t.close();
    await upstream.close();
  });

  const keyWith = async (priority: 'high' | 'low') => {
    const created = await t.app.inject({ method: 'POST', url: '/v1/api-keys', headers: project.auth, payload: { name: priority, project_id: project.projectId, priority } });
    expect(created.statusCode, created.body).toBe(200);
    return { authorization: `Bearer ${created.json().secret}` };
  };
  const sent = (scenario: string) => upstream.requestsOf(scenario).map((request) => request.body.priority);

  it("sends the key's priority, else the project's (normal), in place of the client's", async () => {
    const messages = [{ role: 'user', content: 'hi' }];
    expect((await chat(t.app, await keyWith('high'), { model: 'vllm-1', messages, priority: 7 })).statusCode).toBe(200);
    expect((await chat(t.app, await keyWith('low'), { model: 'vllm-1', messages })).statusCode).toBe(200);
    expect((await chat(t.app, project.auth, { model: 'vllm-1', messages })).statusCode).toBe(200);
    // The project's own priority, set by the admin, for a key without one.
    const patched = await t.app.inject({ method: 'PATCH', url: `/admin/v1/projects/${project.projectId}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, payload: { priority: 'high' } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect((await chat(t.app, project.auth, { model: 'vllm-1', messages })).statusCode).toBe(200);
    expect(sent('vllm')).toEqual([-1, 1, 0, -1]);
  });

  it('leaves the body alone without it: a client-sent priority passes as written', async () => {
    const messages = [{ role: 'user', content: 'hi' }];
    expect((await chat(t.app, project.auth, { model: 'plain-1', messages, priority: 7 })).statusCode).toBe(200);
    expect((await chat(t.app, project.auth, { model: 'plain-1', messages })).statusCode).toBe(200);
    expect(sent('plain')).toEqual([7, undefined]);
  });
});
