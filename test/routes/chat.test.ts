import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildTestApp, createProject, errorOf, type TestApp, type TestProject } from '../support/test-app.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { chat, chatConfig, chatEnv, RecordingUsageMeter, sseData, streamedText, UPSTREAM_KEY } from '../support/chat-fixtures.js';
import { freePort } from '../support/redis-server.js';

const user = (content: string) => ({ role: 'user', content });

describe('POST /v1/chat/completions (memory store, fake upstream)', () => {
  let upstream: LoopbackUpstream;
  let test: TestApp;
  let project: TestProject;
  let usage: RecordingUsageMeter;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({
      broken: { status: 500 },
      refused: { status: 400, errorBody: { error: { message: "'temperature' must be <= 2", type: 'invalid_request_error', code: 'bad_temperature', param: 'temperature' } } },
      limited: { status: 429, headers: { 'retry-after': '7' } },
      badkey: { status: 401 },
      slow: { hang: true },
    });
    const closedPort = await freePort();
    usage = new RecordingUsageMeter();
    test = await buildTestApp('memory', {
      config: chatConfig(upstream, [
        { id: 'broken-1', upstream: upstream.baseUrl('broken') },
        { id: 'refused-1', upstream: upstream.baseUrl('refused') },
        { id: 'limited-1', upstream: upstream.baseUrl('limited') },
        { id: 'badkey-1', upstream: upstream.baseUrl('badkey') },
        { id: 'down-1', upstream: `http://127.0.0.1:${closedPort}/v1` },
        { id: 'slow-1', upstream: upstream.baseUrl('slow'), timeout_ms: 300 },
        {
          id: 'with-fallback',
          upstream: upstream.baseUrl('broken'),
          upstream_model: 'primary-model',
          fallbacks: [{ upstream: `http://127.0.0.1:${closedPort}/v1` }, { upstream: upstream.baseUrl('default'), upstream_model: 'backup-model' }],
        },
        { id: 'images-only', upstream: upstream.baseUrl('default'), endpoints: ['images'] },
      ]),
      deps: { usage, env: chatEnv },
    });
    project = await createProject(test.app);
  });
  afterAll(async () => {
    await test.close();
    await upstream.close();
  });
  beforeEach(() => {
    upstream.requests.length = 0;
    usage.records.length = 0;
  });

  it('proxies a completion: envelope, choices, usage, conversation id; the upstream sees its model name, key and extra fields', async () => {
    const res = await chat(
      test.app,
      project.auth,
      { model: 'fake-1', messages: [user('Hi')], temperature: 0.2, vendor_extension: { a: 1 }, store: true },
      { 'x-request-id': 'req-chat-1' },
    );
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      id: 'chatcmpl-fake123',
      object: 'nova.resource',
      status: 'succeeded',
      model: 'fake-1',
      created: 1_700_000_000,
      usage: { prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 },
    });
    expect(body.choices[0].message.content).toBe('Hello from the fake upstream.');
    expect(body.conversation_id).toMatch(/^conv_[0-9A-Za-z]{16,}$/);
    // The envelope first, then the upstream's fields in its order, then what the gateway adds.
    expect(Object.keys(body)).toEqual(['id', 'object', 'status', 'created', 'model', 'choices', 'usage', 'conversation_id']);
    const [sent] = upstream.requests;
    expect(sent!.path).toBe('/default/v1/chat/completions');
    expect(sent!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(sent!.headers['x-request-id']).toBe('req-chat-1');
    // max_tokens: the model's max_output_tokens, added because the request named no output bound.
    expect(sent!.body).toEqual({ model: 'fake/model-1', messages: [user('Hi')], temperature: 0.2, vendor_extension: { a: 1 }, max_tokens: 4096 });
    expect(usage.of('req-chat-1')).toEqual([
      expect.objectContaining({ projectId: project.projectId, model: 'fake-1', promptTokens: 7, completionTokens: 5 }),
    ]);
    expect(usage.of('req-chat-1')[0]!.storageBytesDelta).toBeGreaterThan(0);
  });

  it('streams the upstream events through, hides the usage chunk it asked for, and counts the tokens once', async () => {
    const res = await chat(test.app, project.auth, { model: 'fake-1', messages: [user('Hi')], stream: true, store: true }, { 'x-request-id': 'req-stream-1' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(res.headers['x-conversation-id']).toMatch(/^conv_/);
    expect(streamedText(res.body)).toBe('Hello from the fake upstream.');
    const data = sseData(res.body);
    expect(data.at(-1)).toBe('[DONE]');
    expect(data.some((event) => event.includes('"usage":{'))).toBe(false);
    expect(upstream.requests[0]!.body.stream_options).toEqual({ include_usage: true });
    expect(usage.of('req-stream-1')).toEqual([expect.objectContaining({ promptTokens: 7, completionTokens: 5 })]);
  });

  it('forwards the usage chunk when the client asked for it', async () => {
    const res = await chat(test.app, project.auth, {
      model: 'fake-1',
      messages: [user('Hi')],
      stream: true,
      stream_options: { include_usage: true },
    });
    const usageEvents = sseData(res.body).filter((event) => event.includes('"usage":{'));
    expect(usageEvents).toHaveLength(1);
    expect(JSON.parse(usageEvents[0]!)).toMatchObject({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 5 } });
  });

  it.each([
    [{ messages: [user('x')] }, 'model'],
    [[{ model: 'fake-1' }], 'body'],
    [{ model: 'fake-1' }, 'messages'],
    [{ model: 'fake-1', messages: 'Hi' }, 'messages'],
    [{ model: 'fake-1', messages: ['Hi'] }, 'messages[0]'],
    [{ model: 'fake-1', messages: [{ content: 'x' }] }, 'messages[0].role'],
    [{ model: 'fake-1', messages: [{ role: 5, content: 'x' }] }, 'messages[0].role'],
    [{ model: 'fake-1', messages: [user('x')], stream: 'yes' }, 'stream'],
  ])('refuses an invalid body %j (400, param %s) without calling the upstream', async (payload, param) => {
    const res = await chat(test.app, project.auth, payload as Record<string, unknown>);
    expect(errorOf(res)).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_parameter', param });
    expect(upstream.requests).toHaveLength(0);
  });

  it('accepts OpenAI content parts', async () => {
    const res = await chat(test.app, project.auth, {
      model: 'echo-1',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'parts work' }] }],
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().choices[0].message.content).toBe('parts work');
  });

  it('answers 404 model_not_found for an unknown model or one without the chat endpoint', async () => {
    for (const model of ['nope', 'images-only']) {
      const res = await chat(test.app, project.auth, { model, messages: [user('x')] });
      expect(errorOf(res)).toMatchObject({ status: 404, type: 'not_found_error', code: 'model_not_found', param: 'model' });
    }
  });

  it('needs a key (401) before anything else', async () => {
    const res = await chat(test.app, { authorization: 'Bearer nope' }, { model: 'fake-1', messages: [user('x')] });
    expect(res.statusCode).toBe(401);
    expect(upstream.requests).toHaveLength(0);
  });

  it.each([
    ['down-1', 503, 'upstream_unavailable'],
    ['broken-1', 502, 'upstream_error'],
    ['badkey-1', 502, 'upstream_error'],
  ])('maps a failing upstream of %s to %i %s (both modes), metering nothing', async (model, status, code) => {
    for (const stream of [false, true]) {
      const res = await chat(test.app, project.auth, { model, messages: [user('x')], stream }, { 'x-request-id': `req-${model}-${stream}` });
      expect(errorOf(res)).toMatchObject({ status, type: 'upstream_error', code });
      expect(res.body).not.toContain(UPSTREAM_KEY);
      expect(usage.of(`req-${model}-${stream}`)).toEqual([expect.objectContaining({ promptTokens: 0, completionTokens: 0 })]);
      // An error answer, reported by the model call and the response's end (one counts).
      expect(usage.errorsOf(`req-${model}-${stream}`)).not.toHaveLength(0);
    }
  });

  it('charges the whole reservation when the upstream timed out after it had the request (it may have worked on it)', async () => {
    for (const stream of [false, true]) {
      const res = await chat(test.app, project.auth, { model: 'slow-1', messages: [user('x')], stream }, { 'x-request-id': `req-slow-1-${stream}` });
      expect(errorOf(res)).toMatchObject({ status: 504, type: 'upstream_error', code: 'upstream_timeout' });
      // The prompt's bytes (keys and strings: role user content x = 16) and the default output bound, 4096.
      expect(usage.of(`req-slow-1-${stream}`)).toEqual([expect.objectContaining({ promptTokens: 16, completionTokens: 4096 })]);
    }
    const counted = await test.ctx.metrics.registry.getSingleMetricAsString('nova_charged_as_reserved_total');
    expect(counted).toMatch(/nova_charged_as_reserved_total\{gen_ai_request_model="slow-1",reason="usage_missing"\} 2/);
  });

  it('keeps an upstream 4xx with its message, and an upstream 429 as 429 with Retry-After', async () => {
    const refused = await chat(test.app, project.auth, { model: 'refused-1', messages: [user('x')], temperature: 9 });
    expect(errorOf(refused)).toMatchObject({
      status: 400,
      type: 'invalid_request_error',
      code: 'bad_temperature',
      param: 'temperature',
      message: "'temperature' must be <= 2",
    });
    const limited = await chat(test.app, project.auth, { model: 'limited-1', messages: [user('x')], stream: true });
    expect(errorOf(limited)).toMatchObject({ status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(limited.headers['retry-after']).toBe('7');
  });

  it('falls back, in order, past a 500 and a refused connection to a target that works', async () => {
    for (const stream of [false, true]) {
      upstream.requests.length = 0;
      const res = await chat(test.app, project.auth, { model: 'with-fallback', messages: [user('x')], stream });
      expect(res.statusCode).toBe(200);
      const text = stream ? streamedText(res.body) : res.json().choices[0].message.content;
      expect(text).toBe('Hello from the fake upstream.');
      expect(upstream.requests.map((request) => [request.scenario, request.body.model])).toEqual([
        ['broken', 'primary-model'],
        ['default', 'backup-model'],
      ]);
    }
    const metrics = await test.ctx.metrics.registry.getSingleMetricAsString('nova_upstream_fallbacks_total');
    expect(metrics).toMatch(/gen_ai_request_model="with-fallback"/);
  });

  it('answers from the built-in echo model, streaming word by word with usage', async () => {
    const json = await chat(test.app, project.auth, { model: 'echo-1', messages: [user('one two three')] });
    expect(json.json()).toMatchObject({ choices: [{ message: { content: 'one two three' } }], usage: { completion_tokens: 3 } });
    const stream = await chat(test.app, project.auth, {
      model: 'echo-1',
      messages: [user('one two three')],
      stream: true,
      stream_options: { include_usage: true },
    }, { 'x-request-id': 'req-echo-stream' });
    expect(streamedText(stream.body)).toBe('one two three');
    expect(sseData(stream.body).filter((data) => /"content":"[^"]/.test(data))).toHaveLength(3);
    expect(usage.of('req-echo-stream')).toEqual([expect.objectContaining({ promptTokens: 3, completionTokens: 3 })]);
  });
});
