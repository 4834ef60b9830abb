import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { RecordingUsageMeter } from '../support/chat-fixtures.js';
import { LoopbackUpstream, PLAIN_ANSWER, SDK_BACKEND } from '../support/loopback-upstream.js';
import { buildTestApp, createProject, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

/** The OpenAI-shaped model routes at the app level: what is read, what is refused, what passes through. */
describe.each(STORE_KINDS)('completions, embeddings and responses routes (%s store)', (kind) => {
  let upstream: LoopbackUpstream;
  let test: TestApp;
  let project: TestProject;
  let usage: RecordingUsageMeter;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({ default: SDK_BACKEND });
    usage = new RecordingUsageMeter();
    const config = defaultConfig({
      models: [
        { id: 'all-1', upstream: upstream.baseUrl(), upstream_model: 'backend/all', endpoints: ['chat', 'completions', 'embeddings', 'responses'] },
        { id: 'chat-only', upstream: upstream.baseUrl() },
      ],
      conversations: { store_default: true },
    });
    test = await buildTestApp(kind, { config, deps: { usage } });
    project = await createProject(test.app);
  });
  afterAll(async () => {
    await test.close();
    await upstream.close();
  });
  beforeEach(() => {
    upstream.requests.length = 0;
  });

  const post = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
    test.app.inject({ method: 'POST', url, headers: { ...project.auth, 'content-type': 'application/json', ...headers }, payload: JSON.stringify(payload) });

  it.each([
    ['/v1/completions', { prompt: 'x' }, 'model'],
    ['/v1/embeddings', ['x'], 'body'],
    ['/v1/responses', { model: 'all-1', stream: 'yes' }, 'stream'],
    ['/v1/responses', { model: 'all-1', previous_response_id: 5 }, 'previous_response_id'],
    ['/v1/completions', { model: 'all-1', stream_options: 'usage' }, 'stream_options'],
  ])('%s refuses %j with a 400 naming %s, without calling the upstream', async (url, payload, param) => {
    expect(errorOf(await post(url, payload))).toMatchObject({ status: 400, code: 'invalid_parameter', param });
    expect(upstream.requests).toHaveLength(0);
  });

  it('passes every other field through as written (adding the output bound it names none of), and answers in the upstream\'s own shape with the public model', async () => {
    const payload = { model: 'all-1', prompt: ['a', 'b'], suffix: 'z', logit_bias: { '50256': -100 }, vendor: { deep: [1, { x: null }] } };
    const res = await post('/v1/completions', payload, { 'x-request-id': `req-passthrough-${kind}` });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ object: 'text_completion', model: 'all-1', choices: [{ text: ' and so on.' }] });
    expect(body).not.toHaveProperty('status');
    // No max field named: the model's bound (here the default, 4096) is what the upstream may produce.
    expect(upstream.requests[0]!.body).toEqual({ ...payload, model: 'backend/all', max_tokens: 4096 });
    expect(usage.of(`req-passthrough-${kind}`)).toEqual([expect.objectContaining({ model: 'all-1', promptTokens: 9, completionTokens: 3 })]);
  });

  it('answers 404 model_not_found for a model that does not serve the route', async () => {
    for (const url of ['/v1/completions', '/v1/embeddings', '/v1/responses']) {
      expect(errorOf(await post(url, { model: 'chat-only', input: 'x', prompt: 'x' }))).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
    }
  });

  it('keeps no owner for a response created with store: false, and 404s ids that are not the project\'s', async () => {
    const unstored = await post('/v1/responses', { model: 'all-1', input: 'Hi', store: false });
    expect(unstored.json().output[0].content[0].text).toBe(PLAIN_ANSWER);
    const id = unstored.json().id as string;
    for (const responseId of [id, 'resp_unknown', 'not an id!']) {
      const res = await test.app.inject({ url: `/v1/responses/${encodeURIComponent(responseId)}`, headers: project.auth });
      expect(errorOf(res)).toMatchObject({ status: 404, code: 'resource_not_found', param: 'response_id' });
    }
    const stored = await post('/v1/responses', { model: 'all-1', input: 'Hi' });
    const items = await test.app.inject({ url: `/v1/responses/${stored.json().id}/input_items?limit=5`, headers: project.auth });
    expect(items.json()).toMatchObject({ object: 'list', data: [] });
    expect(upstream.requests.at(-1)).toMatchObject({ method: 'GET', route: `/responses/${stored.json().id}/input_items` });
  });

  it('stores chat by default when conversations.store_default is on, unless the request says store: false', async () => {
    const stored = await post('/v1/chat/completions', { model: 'all-1', messages: [{ role: 'user', content: 'Hi' }] });
    expect(stored.json().conversation_id).toMatch(/^conv_/);
    const unstored = await post('/v1/chat/completions', { model: 'all-1', messages: [{ role: 'user', content: 'Hi' }], store: false });
    expect(unstored.json().conversation_id).toBeNull();
  });
});
