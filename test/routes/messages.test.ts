import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { buildTestApp, createProject, type TestApp, type TestProject } from '../support/test-app.js';
import { MessagesUpstream } from '../support/messages-upstream.js';
import { LoopbackUpstream, PLAIN_ANSWER, SDK_BACKEND } from '../support/loopback-upstream.js';

/** Server-sent events of a body: each event's type and parsed data. */
function eventsOf(text: string): { event: string; data: Record<string, unknown> }[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split('\n');
      const event = lines.find((line) => line.startsWith('event: '))!.slice(7);
      const data = JSON.parse(lines.find((line) => line.startsWith('data: '))!.slice(6)) as Record<string, unknown>;
      return { event, data };
    });
}

describe('POST /v1/messages', () => {
  let native: MessagesUpstream;
  let openai: LoopbackUpstream;
  let test: TestApp;
  let project: TestProject;
  const ask = { max_tokens: 64, messages: [{ role: 'user', content: 'Hi' }] };

  beforeAll(async () => {
    native = await MessagesUpstream.start({ default: {}, cached: { inputTokens: 5, cacheReadTokens: 100, cacheWriteTokens: 7 } });
    openai = await LoopbackUpstream.start({ default: SDK_BACKEND });
    const config = defaultConfig({
      models: [
        { id: 'native', upstream: native.baseUrl(), upstream_model: 'claude-served', endpoints: ['messages'], api: 'anthropic', aliases: ['claude-*'] },
        { id: 'native-cached', upstream: native.baseUrl('cached'), endpoints: ['messages'], api: 'anthropic' },
        { id: 'llama', upstream: openai.baseUrl(), upstream_model: 'llama-served', endpoints: ['chat', 'messages'], aliases: ['gpt-4o*'] },
        { id: 'chat-only', upstream: openai.baseUrl(), endpoints: ['chat'] },
      ],
      server: { model_body_limit_bytes: 64 * 1024 } as never,
    });
    test = await buildTestApp('memory', { config });
    project = await createProject(test.app);
  });
  afterAll(async () => {
    await test.close();
    await native.close();
    await openai.close();
  });

  const post = (body: Record<string, unknown>, headers: Record<string, string> = {}, url = '/v1/messages') =>
    test.app.inject({ method: 'POST', url, headers: { 'x-api-key': project.secret, 'anthropic-version': '2023-06-01', ...headers }, payload: body });

  it('passes a native request through as written: headers, query, unknown fields, model swapped both ways', async () => {
    const body = { model: 'native', ...ask, thinking: { type: 'enabled', budget_tokens: 1024 }, context_management: { edits: [] }, novel_field: 1 };
    const response = await post(body, { 'anthropic-beta': 'a-beta,b-beta' }, '/v1/messages?beta=true');
    expect(response.statusCode).toBe(200);
    const message = response.json();
    expect(message.model).toBe('native');
    expect(message.type).toBe('message');
    const seen = native.requestsTo('/messages').at(-1)!;
    expect(seen.query).toEqual({ beta: 'true' });
    expect(seen.headers['anthropic-version']).toBe('2023-06-01');
    expect(seen.headers['anthropic-beta']).toBe('a-beta,b-beta');
    expect(seen.headers['x-api-key']).toBeUndefined();
    expect(seen.body).toEqual({ ...body, model: 'claude-served' });
    expect(response.headers['request-id']).toBe(response.headers['x-request-id']);
    expect(response.headers['anthropic-ratelimit-requests-limit']).toBe(response.headers['x-ratelimit-limit-requests']);
    expect(Date.parse(String(response.headers['anthropic-ratelimit-requests-reset']))).toBeGreaterThan(Date.now() - 1000);
  });

  it('streams a native reply with the public id in message_start, and meters message_start + message_delta usage', async () => {
    const response = await post({ model: 'native-cached', ...ask, stream: true });
    expect(response.statusCode).toBe(200);
    const events = eventsOf(response.body);
    expect(events[0]!.event).toBe('message_start');
    expect((events[0]!.data.message as { model: string }).model).toBe('native-cached');
    expect(events.at(-1)!.event).toBe('message_stop');
    const text = events.filter((e) => e.event === 'content_block_delta').map((e) => (e.data.delta as { text?: string }).text ?? '').join('');
    expect(text).toBe(PLAIN_ANSWER);
  });

  it('answers by the alias the client sent', async () => {
    const response = await post({ model: 'claude-opus-4-8', ...ask });
    expect(response.statusCode).toBe(200);
    expect(response.json().model).toBe('claude-opus-4-8');
    expect(native.requestsTo('/messages').at(-1)!.body.model).toBe('claude-served');
  });

  it('answers chat by the alias the client sent too, JSON and stream', async () => {
    const chat = (stream: boolean) =>
      test.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: project.auth, payload: { model: 'gpt-4o-mini', stream, messages: ask.messages } });
    const json = await chat(false);
    expect(json.statusCode).toBe(200);
    expect(json.json().model).toBe('gpt-4o-mini');
    expect((openai.requests.at(-1)!.body as { model: string }).model).toBe('llama-served');
    const stream = await chat(true);
    expect(stream.body).toContain('"model":"gpt-4o-mini"');
    expect(stream.body).not.toContain('llama-served');
  });

  it('translates for an OpenAI-compatible model, JSON and stream', async () => {
    const json = await post({ model: 'llama', system: 'Be brief.', ...ask });
    expect(json.statusCode).toBe(200);
    const message = json.json();
    expect(message).toMatchObject({ type: 'message', role: 'assistant', model: 'llama', stop_reason: 'end_turn' });
    expect(message.content[0]).toEqual({ type: 'text', text: PLAIN_ANSWER });
    const sent = openai.requests.at(-1)!;
    expect(sent.path).toContain('/chat/completions');
    expect((sent.body as { messages: unknown[] }).messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    const stream = await post({ model: 'llama', ...ask, stream: true });
    const events = eventsOf(stream.body);
    expect(events.map((e) => e.event)).toEqual(expect.arrayContaining(['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']));
    expect(events.at(-1)!.event).toBe('message_stop');
    const delta = events.find((e) => e.event === 'message_delta')!.data;
    expect(delta).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { output_tokens: expect.any(Number) } });
  });

  it('authenticates x-api-key or Bearer; two different keys are a 401 in Anthropic shape', async () => {
    const bearer = await test.app.inject({ method: 'POST', url: '/v1/messages', headers: { authorization: `Bearer ${project.secret}` }, payload: { model: 'native', ...ask } });
    expect(bearer.statusCode).toBe(200);
    const both = await post({ model: 'native', ...ask }, { authorization: 'Bearer nova_sk_0000000000000000000000000000000000000000' });
    expect(both.statusCode).toBe(401);
    expect(both.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' }, request_id: both.headers['x-request-id'] });
  });

  it('answers errors in Anthropic shape: 400 naming the field, 404 naming the endpoints, 413 over the model body limit', async () => {
    const missing = await post({ model: 'native', messages: [] });
    expect(missing.statusCode).toBe(400);
    expect(missing.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringContaining('max_tokens') } });
    const wrongRoute = await post({ model: 'chat-only', ...ask });
    expect(wrongRoute.statusCode).toBe(404);
    expect(wrongRoute.json().error).toMatchObject({ type: 'not_found_error', message: expect.stringContaining('/v1/chat/completions') });
    const big = await post({ model: 'native', ...ask, padding: 'x'.repeat(70 * 1024) });
    expect(big.statusCode).toBe(413);
    expect(big.json().error.type).toBe('request_too_large');
  });

  it('counts tokens: forwarded to a native upstream, estimated for a translated one', async () => {
    const forwarded = await post({ model: 'native', messages: ask.messages }, {}, '/v1/messages/count_tokens');
    expect(forwarded.statusCode).toBe(200);
    expect(forwarded.json()).toEqual({ input_tokens: 11 });
    expect(native.requestsTo('/messages/count_tokens').length).toBeGreaterThan(0);
    const estimated = await post({ model: 'llama', messages: ask.messages }, {}, '/v1/messages/count_tokens');
    expect(estimated.statusCode).toBe(200);
    expect(estimated.json().input_tokens).toBeGreaterThan(0);
  });

  it('lists and retrieves models in Anthropic shape when anthropic-version is sent, paged by limit and ids', async () => {
    const get = (url: string, headers: Record<string, string> = { 'anthropic-version': '2023-06-01' }) =>
      test.app.inject({ method: 'GET', url, headers: { 'x-api-key': project.secret, ...headers } });
    const first = await get('/v1/models?limit=2');
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ data: [{ type: 'model', id: 'native', display_name: 'native' }, { id: 'native-cached' }], has_more: true, first_id: 'native', last_id: 'native-cached' });
    expect(Date.parse(first.json().data[0].created_at)).not.toBeNaN();
    const next = await get('/v1/models?limit=2&after_id=native-cached');
    expect(next.json()).toMatchObject({ data: [{ id: 'llama' }, { id: 'chat-only' }], has_more: false });
    const back = await get('/v1/models?limit=1&before_id=llama');
    expect(back.json()).toMatchObject({ data: [{ id: 'native-cached' }], has_more: true });
    const badLimit = await get('/v1/models?limit=0');
    expect(badLimit.statusCode).toBe(400);
    expect(badLimit.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringContaining('limit') } });
    expect((await get('/v1/models/claude-haiku-4')).json()).toMatchObject({ type: 'model', id: 'claude-haiku-4' });
    const unknown = await get('/v1/models/nope');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error.type).toBe('not_found_error');
    const openAiShape = await get('/v1/models', {});
    expect(openAiShape.json()).toMatchObject({ object: 'list', data: expect.arrayContaining([expect.objectContaining({ id: 'llama', object: 'model' })]) });
  });
});
