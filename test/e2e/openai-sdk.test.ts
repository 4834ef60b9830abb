import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { GatewayProcess } from '../support/gateway-process.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const UPSTREAM_KEY = `sk-upstream-${randomBase62(24)}`;
const REPLY = ['The', ' quick', ' brown', ' fox', ' jumps.'];

/** The official OpenAI SDK against the real server process, a real Redis and a fake upstream. */
describe('OpenAI SDK v6 against the gateway (real process, real Redis)', () => {
  let upstream: LoopbackUpstream;
  let gateway: GatewayProcess;
  let client: OpenAI;
  let secret: string;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({ default: { chunks: REPLY }, limited: { status: 429, headers: { 'retry-after': '2' } } });
    const configYaml = `
models:
  - id: echo-1
    provider: echo
    context_window: 8192
    max_output_tokens: 1024
  - id: fake-1
    upstream: ${upstream.baseUrl('default')}
    upstream_model: fake/model-1
    api_key_env: E2E_UPSTREAM_KEY
    timeout_ms: 5000
  - id: limited-1
    upstream: ${upstream.baseUrl('limited')}
redis:
  key_prefix: e2e${randomBase62(8)}
`;
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN, E2E_UPSTREAM_KEY: UPSTREAM_KEY },
      configYaml,
    });
    secret = (await gateway.createProject({ name: 'sdk' })).secret;
    client = new OpenAI({ apiKey: secret, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
  });

  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  it('creates a completion with the text the upstream sent', async () => {
    const completion = await client.chat.completions.create({ model: 'fake-1', messages: [{ role: 'user', content: 'Say something' }] });
    expect(completion.choices[0]!.message.content).toBe(REPLY.join(''));
    expect(completion.usage).toMatchObject({ completion_tokens: 5 });
    expect(upstream.requests.at(-1)!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
  });

  it('streams a completion chunk by chunk, with usage when asked', async () => {
    const stream = await client.chat.completions.create({
      model: 'fake-1',
      messages: [{ role: 'user', content: 'Say something' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(REPLY.join(''));
    expect(usage).toMatchObject({ completion_tokens: 5 });

    const { data, response } = await client.chat.completions
      .create({ model: 'echo-1', messages: [{ role: 'user', content: 'echo me back' }], stream: true, store: true })
      .withResponse();
    let echoed = '';
    for await (const chunk of data) echoed += chunk.choices[0]?.delta?.content ?? '';
    expect(echoed).toBe('echo me back');
    expect(response.headers.get('x-conversation-id')).toMatch(/^conv_/);
  });

  it('retrieves a model', async () => {
    const model = await client.models.retrieve('echo-1');
    expect(model).toMatchObject({ id: 'echo-1', owned_by: 'nova-gateway' });
  });

  it('raises the SDK error classes: 401, 400, 404, 429', async () => {
    const bad = new OpenAI({ apiKey: 'nova_sk_not-a-real-key', baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    await expect(bad.models.retrieve('echo-1')).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    await expect(client.chat.completions.create({ model: 'fake-1', messages: 'x' as never })).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    await expect(client.models.retrieve('no-such-model')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(
      client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const limited = client.chat.completions.create({ model: 'limited-1', messages: [{ role: 'user', content: 'x' }] });
    await expect(limited).rejects.toBeInstanceOf(OpenAI.RateLimitError);
    await expect(limited).rejects.toMatchObject({ status: 429, type: 'rate_limit_error' });
  });

  it('never writes a secret to its logs', async () => {
    // One access line per request, carrying what the chat route added (lines leave in blocks, within 200 ms).
    await gateway.waitForLog(
      (line) => line.includes('"route":"/v1/chat/completions"') && line.includes('"msg":"request completed"') && line.includes('"completion_tokens"'),
    );
    const logs = gateway.logs.join('\n');
    for (const value of [secret, UPSTREAM_KEY, ADMIN_TOKEN]) expect(logs).not.toContain(value);
  });
});
