import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { LoopbackUpstream, PLAIN_ANSWER, SDK_BACKEND, WEATHER_ANSWER, words } from '../support/loopback-upstream.js';
import { MessagesUpstream, TOOL_INPUT } from '../support/messages-upstream.js';
import { settle } from '../support/replica-pair.js';
import type { TestProject } from '../support/test-app.js';
import type { UsageAnswer, UsageGroupRow } from '../support/usage-answer.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const UPSTREAM_KEY = `sk-ant-upstream-${randomBase62(24)}`;
const NATIVE_ANSWER = 'Native messages answer here.';
/** The native upstream's usage: uncached input, cache reads and writes (DESIGN section 8). */
const CACHED = { inputTokens: 5, cacheReadTokens: 100, cacheWriteTokens: 20 };
/** Prices of claude-native, per million: input, output, cache reads, cache writes. */
const PRICES = { input: 3, output: 15, cachedInput: 0.3, cacheWrite: 3.75 };
/** Prices of open-chat. */
const OPEN_PRICES = { input: 1, output: 2 };
const FLUSH_MS = 200;

const WEATHER_TOOL: Anthropic.Tool = {
  name: 'get_weather',
  description: 'Weather of a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const hello: Anthropic.MessageParam[] = [{ role: 'user', content: 'Say hello' }];

interface SseEvent {
  event: string;
  data: Record<string, unknown>;
}

/** A stream's events as the wire has them: each `event:` name with its parsed `data:`. */
function sseEvents(text: string): SseEvent[] {
  return text
    .split(/\r?\n\r?\n/)
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const event = /^event: ?(.*)$/m.exec(block)?.[1] ?? '';
      const data = /^data: ?(.*)$/m.exec(block)?.[1] ?? 'null';
      try {
        return { event, data: JSON.parse(data) as Record<string, unknown> };
      } catch {
        return { event, data: { unparsed: data } };
      }
    });
}

/**
 * Issue 31's acceptance with the official TypeScript `@anthropic-ai/sdk` (DESIGN section 8), through
 * its own methods, against the real gateway process, a real Redis and two loopback upstreams: a
 * native Messages backend (test/support/messages-upstream.ts, `api: anthropic`) and an OpenAI-only
 * one (test/support/loopback-upstream.ts, `api: openai`, translated). Then exact counting, and bad
 * input that costs nothing.
 */
describe('Anthropic TypeScript SDK against the gateway (real process, real Redis)', () => {
  let messagesUp: MessagesUpstream;
  let openUp: LoopbackUpstream;
  let gateway: GatewayProcess;
  let project: TestProject;
  let client: Anthropic;
  /** The headers of the main client's last request, as the SDK sent them. */
  let lastSent = new Headers();

  beforeAll(async () => {
    messagesUp = await MessagesUpstream.start({
      native: { text: words(NATIVE_ANSWER), ...CACHED },
      // Always 429 with a retry-after, for the error class; once, for the retry.
      limited: { status: 429, headers: { 'retry-after': '1' } },
      flaky: { status: 429, statusTimes: 1, headers: { 'retry-after': '1' } },
      // Slow enough that a second call meets the concurrency limit while the first runs.
      slow: { latencyMs: 1500 },
      // Forty words at 50 ms each: a client can leave in the middle.
      paced: { text: Array.from({ length: 40 }, (_, i) => `w${i} `), chunkDelayMs: 50, inputTokens: 30 },
      cut: { text: words(NATIVE_ANSWER), broken: { afterDeltas: 2, how: 'cut' }, inputTokens: 17 },
      garbage: { text: words(NATIVE_ANSWER), broken: { afterDeltas: 2, how: 'garbage' }, inputTokens: 17 },
    });
    openUp = await LoopbackUpstream.start({ default: SDK_BACKEND, cut: { ...SDK_BACKEND, closeAfterChunks: 2, chunkDelayMs: 10 } });
    const native = (id: string, scenario: string, extra = '') => `
  - id: ${id}
    api: anthropic
    upstream: ${messagesUp.baseUrl(scenario)}
    upstream_model: vendor/${scenario}-model
    api_key_env: E2E_ANTHROPIC_KEY
    endpoints: [messages]${extra}`;
    const configYaml = `
models:${native('claude-native', 'native', `
    aliases: ['claude-*']
    pricing: { input_per_million: ${PRICES.input}, output_per_million: ${PRICES.output}, cached_input_per_million: ${PRICES.cachedInput}, cache_write_per_million: ${PRICES.cacheWrite} }`)}
  - id: open-chat
    upstream: ${openUp.baseUrl('default')}
    upstream_model: backend/open
    endpoints: [chat, messages]
    pricing: { input_per_million: ${OPEN_PRICES.input}, output_per_million: ${OPEN_PRICES.output} }
  - id: open-cut
    upstream: ${openUp.baseUrl('cut')}
    endpoints: [chat, messages]
${['limited', 'flaky', 'slow', 'paced', 'cut', 'garbage'].map((scenario) => native(`native-${scenario}`, scenario)).join('')}
redis:
  key_prefix: anth${randomBase62(8)}
usage:
  flush_interval_ms: ${FLUSH_MS}
`;
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN, E2E_ANTHROPIC_KEY: UPSTREAM_KEY, LOG_LEVEL: 'warn' },
      configYaml,
    });
    project = await gateway.createProject({ name: 'anthropic-sdk' });
    const recording: typeof fetch = (input, init) => {
      lastSent = new Headers(init?.headers as HeadersInit);
      return fetch(input, init);
    };
    client = new Anthropic({ apiKey: project.secret, baseURL: gateway.url, maxRetries: 0, fetch: recording });
  });

  afterAll(async () => {
    await gateway?.stop();
    await messagesUp?.close();
    await openUp?.close();
  });

  /** A project of its own (usage read exactly), with a client on its key. */
  async function tenant(policy: Record<string, unknown> = {}, options: { maxRetries?: number; fetch?: typeof fetch } = {}) {
    const own = await gateway.createProject({ name: `anthropic-${randomBase62(6)}`, ...policy });
    return { project: own, client: new Anthropic({ apiKey: own.secret, baseURL: gateway.url, maxRetries: options.maxRetries ?? 0, fetch: options.fetch }) };
  }

  /** The project's usage of the last 24 h, by model (its own usage reads count as requests of model null). */
  async function usageOf(own: TestProject): Promise<UsageAnswer> {
    const response = await fetch(`${gateway.url}/v1/projects/${own.projectId}/usage?group_by=model`, { headers: own.auth });
    expect(response.status).toBe(200);
    return (await response.json()) as UsageAnswer;
  }

  const EMPTY_ROW: UsageGroupRow = { requests: 0, tokens: { prompt: 0, completion: 0, total: 0, cached_prompt: 0, cache_write: 0, reasoning: 0 }, image_generations: 0, audio_seconds: 0, cost: 0, refusals: { requests: 0, tokens: 0, concurrency: 0, budget: 0 }, errors: 0 };
  async function usageOfModel(own: TestProject, model: string): Promise<UsageGroupRow> {
    return (await usageOf(own)).groups?.find((group) => group.model === model) ?? EMPTY_ROW;
  }

  /** A model's usage once `requests` show (flushed every FLUSH_MS), read again a moment later so that nothing more is coming. */
  async function settledUsage(own: TestProject, model: string, requests: number): Promise<UsageGroupRow> {
    await settle(() => usageOfModel(own, model), (usage) => usage.requests >= requests, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 3 * FLUSH_MS));
    return usageOfModel(own, model);
  }

  /** POST /v1/messages outside the SDK (bodies it would not send), with the key as x-api-key. */
  const rawMessages = (own: TestProject, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${gateway.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': own.secret, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  describe('through its own methods', () => {
    it('creates a message on a native upstream: the request as written, the public model id, the cache usage', async () => {
      const sent = {
        model: 'claude-native',
        max_tokens: 200,
        system: [{ type: 'text' as const, text: 'Be brief.', cache_control: { type: 'ephemeral' as const } }],
        messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'Say hello', cache_control: { type: 'ephemeral' as const } }] }],
        thinking: { type: 'enabled' as const, budget_tokens: 1024 },
        metadata: { user_id: 'user-1' },
        // Fields the gateway does not know reach a native upstream as written.
        context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
        nova_unknown_field: { nested: [1, 'two', null] },
      };
      // As Claude Code sends it: `?beta=true` and a beta header.
      const { data: message, response } = await client.beta.messages
        .create({ ...sent, betas: ['context-management-2025-06-27'] } as unknown as Anthropic.Beta.MessageCreateParamsNonStreaming, { query: { beta: 'true' } })
        .withResponse();
      expect(message).toMatchObject({
        type: 'message',
        role: 'assistant',
        model: 'claude-native',
        content: [{ type: 'text', text: NATIVE_ANSWER }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 5, cache_read_input_tokens: 100, cache_creation_input_tokens: 20, output_tokens: 4 },
      });
      expect(response.headers.get('request-id')).toBe(response.headers.get('x-request-id'));
      expect(response.headers.get('request-id')).toBeTruthy();
      expect(response.headers.get('anthropic-ratelimit-requests-limit')).toBe(response.headers.get('x-ratelimit-limit-requests'));
      expect(response.headers.get('anthropic-ratelimit-requests-remaining')).toMatch(/^\d+$/);
      expect(Number.isNaN(Date.parse(response.headers.get('anthropic-ratelimit-requests-reset') ?? ''))).toBe(false);

      const upstream = messagesUp.requestsOf('native').at(-1)!;
      expect(upstream.path).toBe('/native/v1/messages?beta=true');
      expect(upstream.headers['x-api-key']).toBe(UPSTREAM_KEY);
      expect(upstream.headers.authorization).toBeUndefined();
      // The SDK's own anthropic-version and the beta it was given, forwarded; the gateway's key, not the client's.
      expect(lastSent.get('anthropic-version')).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(upstream.headers['anthropic-version']).toBe(lastSent.get('anthropic-version'));
      expect(upstream.headers['anthropic-beta']).toBe(lastSent.get('anthropic-beta'));
      expect(upstream.headers['anthropic-beta']).toContain('context-management-2025-06-27');
      // Everything the client wrote, untouched but the model name.
      expect(upstream.body).toEqual({ ...sent, model: 'vendor/native-model' });
    });

    it('streams a message on a native upstream, message_start naming the public id', async () => {
      const stream = client.messages.stream({ model: 'claude-native', max_tokens: 200, messages: hello });
      let text = '';
      let started: Anthropic.Message | undefined;
      stream.on('text', (delta) => (text += delta));
      stream.on('streamEvent', (event) => {
        if (event.type === 'message_start') started = event.message;
      });
      const message = await stream.finalMessage();
      expect(text).toBe(NATIVE_ANSWER);
      expect(started?.model).toBe('claude-native');
      expect(message).toMatchObject({ model: 'claude-native', stop_reason: 'end_turn', usage: { input_tokens: 5, cache_read_input_tokens: 100, cache_creation_input_tokens: 20, output_tokens: 4 } });
      expect(messagesUp.requestsOf('native').at(-1)!.body).toMatchObject({ model: 'vendor/native-model', stream: true });
    });

    it("answers Claude Code's own model ids through an alias, naming the id sent", async () => {
      const message = await client.messages.create({ model: 'claude-opus-5-5', max_tokens: 100, messages: hello });
      expect(message).toMatchObject({ model: 'claude-opus-5-5', content: [{ type: 'text', text: NATIVE_ANSWER }] });
      expect(messagesUp.requestsOf('native').at(-1)!.body.model).toBe('vendor/native-model');
      const streamed = await client.messages.stream({ model: 'claude-haiku-5', max_tokens: 100, messages: hello }).finalMessage();
      expect(streamed.model).toBe('claude-haiku-5');
    });

    it('creates and streams a message translated to chat completions', async () => {
      const before = openUp.requestsTo('/chat/completions').length;
      const message = await client.messages.create({ model: 'open-chat', max_tokens: 100, system: 'Be brief.', messages: hello });
      expect(message).toMatchObject({ model: 'open-chat', content: [{ type: 'text', text: PLAIN_ANSWER }], stop_reason: 'end_turn', usage: { input_tokens: 9, output_tokens: 4 } });

      const stream = client.messages.stream({ model: 'open-chat', max_tokens: 100, messages: hello });
      let text = '';
      stream.on('text', (delta) => (text += delta));
      const streamed = await stream.finalMessage();
      expect(text).toBe(PLAIN_ANSWER);
      expect(streamed).toMatchObject({ model: 'open-chat', stop_reason: 'end_turn', usage: { output_tokens: 4 } });

      const chats = openUp.requestsTo('/chat/completions').slice(before);
      expect(chats).toHaveLength(2);
      expect(chats[0]!.body).toMatchObject({ model: 'backend/open', max_tokens: 100, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello' }] });
      expect(chats[1]!.body).toMatchObject({ model: 'backend/open', stream: true, stream_options: { include_usage: true } });
    });

    for (const model of ['claude-native', 'open-chat']) {
      for (const streamed of [false, true]) {
        it(`runs a two-turn tool-use loop on ${model}, ${streamed ? 'streamed' : 'not streamed'}`, async () => {
          const send = (messages: Anthropic.MessageParam[]) => {
            const params = { model, max_tokens: 300, tools: [WEATHER_TOOL], messages };
            return streamed ? client.messages.stream(params).finalMessage() : client.messages.create(params);
          };
          const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
          const first = await send(messages);
          expect(first.stop_reason).toBe('tool_use');
          const call = first.content.find((block): block is Anthropic.ToolUseBlock => block.type === 'tool_use');
          expect(call).toMatchObject({ type: 'tool_use', name: 'get_weather', input: TOOL_INPUT });
          messages.push({ role: 'assistant', content: first.content });
          messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call!.id, content: '{"sky":"sunny"}' }] });
          const second = await send(messages);
          expect(second).toMatchObject({ model, stop_reason: 'end_turn', content: [{ type: 'text', text: WEATHER_ANSWER }] });
          if (model === 'open-chat') {
            // The tool result reached the OpenAI side as a tool message answering the call's id.
            const last = openUp.requestsTo('/chat/completions').at(-1)!.body.messages as Array<Record<string, unknown>>;
            expect(last.at(-2)).toMatchObject({ role: 'assistant', tool_calls: [{ id: call!.id, type: 'function', function: { name: 'get_weather' } }] });
            expect(last.at(-1)).toEqual({ role: 'tool', tool_call_id: call!.id, content: '{"sky":"sunny"}' });
          } else {
            expect(messagesUp.requestsOf('native').at(-1)!.body.messages).toEqual(JSON.parse(JSON.stringify(messages)));
          }
        });
      }
    }

    it('counts tokens: the native upstream counts them, the translated model gets the gateway estimate', async () => {
      const before = openUp.requests.length;
      const native = await client.messages.countTokens({ model: 'claude-native', messages: hello, system: 'Be brief.' });
      expect(native).toEqual({ input_tokens: 125 });
      const counted = messagesUp.requestsOf('native').at(-1)!;
      expect(counted.route).toBe('/messages/count_tokens');
      expect(counted.body).toEqual({ model: 'vendor/native-model', messages: hello, system: 'Be brief.' });

      const estimated = await client.messages.countTokens({ model: 'open-chat', messages: hello });
      expect(Number.isInteger(estimated.input_tokens)).toBe(true);
      expect(estimated.input_tokens).toBeGreaterThan(0);
      expect(openUp.requests.length).toBe(before);
    });

    it("lists and retrieves models in Anthropic's shape, page by page", async () => {
      const first = await client.models.list();
      const ids = first.data.map((model) => model.id);
      expect(ids).toEqual(expect.arrayContaining(['claude-native', 'open-chat']));
      for (const model of first.data) {
        expect(model).toMatchObject({ type: 'model', id: expect.any(String), display_name: expect.any(String) });
        expect(Number.isNaN(Date.parse(model.created_at))).toBe(false);
      }
      const paged: string[] = [];
      for await (const model of client.models.list({ limit: 2 })) paged.push(model.id);
      expect(paged).toEqual(ids);
      const page = await client.models.list({ limit: 2 });
      expect(page.data).toHaveLength(2);
      expect(page.has_more).toBe(true);
      expect(await client.models.retrieve('open-chat')).toMatchObject({ type: 'model', id: 'open-chat' });
    });

    it('authenticates with x-api-key (what ANTHROPIC_API_KEY sends) and refuses two different keys', async () => {
      const viaHeader = new Anthropic({ apiKey: null, baseURL: gateway.url, maxRetries: 0, defaultHeaders: { 'x-api-key': project.secret } });
      expect((await viaHeader.messages.create({ model: 'open-chat', max_tokens: 50, messages: hello })).content).toEqual([{ type: 'text', text: PLAIN_ANSWER }]);
      const both = await rawMessages(project, { model: 'open-chat', max_tokens: 50, messages: hello }, { authorization: 'Bearer nova_sk_someone-else' });
      expect(both.status).toBe(401);
      expect(await both.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    });

    it('raises the SDK error classes: 401, 404, 400, 429', async () => {
      const stranger = new Anthropic({ apiKey: 'nova_sk_not-a-real-key', baseURL: gateway.url, maxRetries: 0 });
      const unauthorized = stranger.messages.create({ model: 'claude-native', max_tokens: 10, messages: hello });
      await expect(unauthorized).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
      await expect(unauthorized).rejects.toMatchObject({ status: 401, error: { type: 'error', error: { type: 'authentication_error' } } });

      const missing = client.messages.create({ model: 'no-such-model', max_tokens: 10, messages: hello });
      await expect(missing).rejects.toBeInstanceOf(Anthropic.NotFoundError);
      await expect(missing).rejects.toMatchObject({ status: 404, error: { error: { type: 'not_found_error' } } });

      const malformed = client.messages.create({ model: 'claude-native', max_tokens: 10, messages: 'x' as never });
      await expect(malformed).rejects.toBeInstanceOf(Anthropic.BadRequestError);
      await expect(malformed).rejects.toMatchObject({ status: 400, error: { error: { type: 'invalid_request_error' } } });

      const limited = client.messages.create({ model: 'native-limited', max_tokens: 10, messages: hello });
      await expect(limited).rejects.toBeInstanceOf(Anthropic.RateLimitError);
      await expect(limited).rejects.toMatchObject({ status: 429, error: { error: { type: 'rate_limit_error' } } });
      const retryAfter = await limited.catch((error: InstanceType<typeof Anthropic.RateLimitError>) => error.headers?.get('retry-after'));
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    });

    it("retries an upstream's 429 after its retry-after, and the gateway's own concurrency 429 after the gateway's", async () => {
      const flaky = new Anthropic({ apiKey: project.secret, baseURL: gateway.url, maxRetries: 2 });
      const message = await flaky.messages.create({ model: 'native-flaky', max_tokens: 10, messages: hello });
      expect(message.content).toEqual([{ type: 'text', text: PLAIN_ANSWER }]);
      const tries = messagesUp.requestsOf('flaky');
      expect(tries).toHaveLength(2);
      expect(tries[1]!.receivedAt - tries[0]!.receivedAt).toBeGreaterThanOrEqual(950);

      // What the SDK met, attempt by attempt.
      const attempts: Array<{ status: number; at: number; retryAfter: string | null }> = [];
      const recording: typeof fetch = async (input, init) => {
        const response = await fetch(input, init);
        attempts.push({ status: response.status, at: Date.now(), retryAfter: response.headers.get('retry-after') });
        return response;
      };
      const { client: patient, project: own } = await tenant({ max_concurrent_requests: 1 }, { maxRetries: 4, fetch: recording });
      const holder = new Anthropic({ apiKey: own.secret, baseURL: gateway.url, maxRetries: 0 }).messages.create({ model: 'native-slow', max_tokens: 10, messages: hello });
      await messagesUp.waitFor((requests) => requests.some((request) => request.scenario === 'slow' && request.headers['x-api-key'] === UPSTREAM_KEY && !request.closed));
      const waited = await patient.messages.create({ model: 'claude-native', max_tokens: 10, messages: hello });
      expect(waited.content).toEqual([{ type: 'text', text: NATIVE_ANSWER }]);
      await holder;
      expect(attempts[0]!.status).toBe(429);
      expect(attempts.at(-1)!.status).toBe(200);
      for (let i = 1; i < attempts.length; i++) {
        expect(attempts[i]!.at - attempts[i - 1]!.at, JSON.stringify(attempts)).toBeGreaterThanOrEqual(Number(attempts[i - 1]!.retryAfter) * 1000 - 50);
      }
    }, 30_000);

    it('does not retry a spent budget (x-should-retry: false)', async () => {
      let attempts = 0;
      const counting: typeof fetch = (input, init) => {
        attempts++;
        return fetch(input, init);
      };
      const { client: spent } = await tenant({ daily_tokens: 50 }, { maxRetries: 3, fetch: counting });
      const refused = spent.messages.create({ model: 'claude-native', max_tokens: 1000, messages: hello });
      await expect(refused).rejects.toBeInstanceOf(Anthropic.RateLimitError);
      const error = (await refused.catch((caught: unknown) => caught)) as InstanceType<typeof Anthropic.RateLimitError>;
      expect(error.headers?.get('x-should-retry')).toBe('false');
      expect(attempts).toBe(1);
    });
  });

  describe('exact counting', () => {
    it('charges a native call its usage, cache reads and writes included, JSON and streamed, at their prices', async () => {
      const { project: own, client: own_client } = await tenant();
      await own_client.messages.create({ model: 'claude-native', max_tokens: 100, messages: hello });
      await own_client.messages.stream({ model: 'claude-native', max_tokens: 100, messages: hello }).finalMessage();
      const usage = await settledUsage(own, 'claude-native', 2);
      // prompt = input + cache reads + cache writes (as OpenAI's prompt_tokens includes its cached tokens).
      const prompt = CACHED.inputTokens + CACHED.cacheReadTokens + CACHED.cacheWriteTokens;
      expect(usage.requests).toBe(2);
      expect(usage.tokens).toEqual({ prompt: 2 * prompt, completion: 2 * 4, total: 2 * (prompt + 4), cached_prompt: 2 * CACHED.cacheReadTokens, cache_write: 2 * CACHED.cacheWriteTokens, reasoning: 0 });
      const cost = (CACHED.inputTokens * PRICES.input + CACHED.cacheReadTokens * PRICES.cachedInput + CACHED.cacheWriteTokens * PRICES.cacheWrite + 4 * PRICES.output) / 1e6;
      expect(usage.cost).toBeCloseTo(2 * cost, 12);
    });

    it('charges a translated call the chat usage, JSON and streamed; count_tokens counts a request and no tokens', async () => {
      const { project: own, client: own_client } = await tenant();
      await own_client.messages.create({ model: 'open-chat', max_tokens: 100, messages: hello });
      await own_client.messages.stream({ model: 'open-chat', max_tokens: 100, messages: hello }).finalMessage();
      await own_client.messages.countTokens({ model: 'open-chat', messages: hello });
      await own_client.messages.countTokens({ model: 'claude-native', messages: hello });
      const usage = await settledUsage(own, 'open-chat', 3);
      expect(usage.requests).toBe(3);
      expect(usage.tokens).toMatchObject({ prompt: 2 * 9, completion: 2 * 4, total: 2 * 13, cached_prompt: 0, cache_write: 0 });
      expect(usage.cost).toBeCloseTo((2 * (9 * OPEN_PRICES.input + 4 * OPEN_PRICES.output)) / 1e6, 12);
      const counted = await settledUsage(own, 'claude-native', 1);
      expect(counted.requests).toBe(1);
      expect(counted.tokens.total).toBe(0);
    });

    it('counts a stream the client left once: its reservation, or the usage the upstream still reported', async () => {
      const { project: own, client: own_client } = await tenant({ tokens_per_minute: 1_000_000 });
      const { data: stream, response } = await own_client.messages.create({ model: 'native-paced', max_tokens: 500, messages: hello, stream: true }).withResponse();
      const reserved = Number(response.headers.get('x-ratelimit-limit-tokens')) - Number(response.headers.get('x-ratelimit-remaining-tokens'));
      expect(reserved).toBeGreaterThanOrEqual(500);
      let deltas = 0;
      for await (const event of stream) {
        if (event.type === 'content_block_delta' && ++deltas === 3) break;
      }
      await messagesUp.waitFor((requests) => requests.filter((request) => request.scenario === 'paced').at(-1)!.closed, 10_000);
      const usage = await settledUsage(own, 'native-paced', 1);
      const upstream = messagesUp.requestsOf('paced').at(-1)!;
      expect(usage.requests).toBe(1);
      // The upstream call aborted with the client (docs/api.md, "Cancellation"): the reservation; read
      // to its end in the background: the usage it reported (input 30, 40 words).
      expect(usage.tokens.total).toBe(upstream.aborted ? reserved : 30 + 40);
      // Nothing more arrives later: counted once.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(await usageOfModel(own, 'native-paced')).toEqual(usage);
    }, 30_000);

    it('refuses a call whose max_tokens exceeds the token rate before it reaches the upstream, charging nothing', async () => {
      const { project: own, client: own_client } = await tenant({ tokens_per_minute: 1000 });
      const before = messagesUp.requests.length;
      const refused = own_client.messages.create({ model: 'claude-native', max_tokens: 5000, messages: hello });
      await expect(refused).rejects.toBeInstanceOf(Anthropic.RateLimitError);
      await expect(refused).rejects.toMatchObject({ error: { type: 'error', error: { type: 'rate_limit_error', message: expect.stringMatching(/max_tokens/) } } });
      expect(messagesUp.requests.length).toBe(before);
      await new Promise((resolve) => setTimeout(resolve, 3 * FLUSH_MS));
      expect((await usageOf(own)).tokens.total).toBe(0);
    });
  });

  describe('bad input costs nothing', () => {
    /** Sends `body` and expects a 400 invalid_request_error naming `param`, nothing upstream and no tokens. */
    async function refusedFree(body: unknown, param: RegExp) {
      const { project: own } = await tenant();
      const upstreamBefore = messagesUp.requests.length + openUp.requests.length;
      const response = await rawMessages(own, body);
      const answer = (await response.json()) as { type: string; error: { type: string; message: string } };
      expect(response.status, JSON.stringify(answer)).toBe(400);
      expect(answer).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
      expect(answer.error.message).toMatch(param);
      expect(messagesUp.requests.length + openUp.requests.length).toBe(upstreamBefore);
      await new Promise((resolve) => setTimeout(resolve, 3 * FLUSH_MS));
      const usage = await usageOf(own);
      expect(usage.tokens.total).toBe(0);
      expect(usage.cost).toBe(0);
      return answer;
    }

    it('a body that is not JSON, and one without max_tokens', async () => {
      await refusedFree('{"model": "claude-native", "messages": [', /./);
      await refusedFree({ model: 'claude-native', messages: hello }, /max_tokens/);
    });

    it("a role other than user/assistant on translation, in the words Claude Code's retry recognises", async () => {
      const answer = await refusedFree(
        { model: 'open-chat', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }, { role: 'system', content: [{ type: 'text', text: 'env' }] }] },
        /messages\W+1\W+role/,
      );
      // Claude Code 2.1.x resends without its mid-conversation system message on a 400 whose message
      // matches this (the pattern its own check uses; test/e2e/claude-code.test.ts runs it).
      expect(answer.error.message).toMatch(/Input should be [\\'"`]{1,2}(?:user|assistant)\b.{0,2} or [\\'"`]{1,2}(?:user|assistant)\b/i);
    });

    it('an image the OpenAI side cannot take, and a document block', async () => {
      const image = { type: 'image', source: { type: 'base64', media_type: 'image/heic', data: 'AAAA' } };
      await refusedFree({ model: 'open-chat', max_tokens: 50, messages: [{ role: 'user', content: [image, { type: 'text', text: 'what is it?' }] }] }, /media_type/);
      const document = { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'a document' } };
      await refusedFree({ model: 'open-chat', max_tokens: 50, messages: [{ role: 'user', content: [document] }] }, /document/);
    });

    // `input`: the input tokens message_start reported before the break (the OpenAI side reports none before its end).
    for (const [model, what, input] of [
      ['native-cut', 'a native upstream that cuts the connection', 17],
      ['native-garbage', 'a native upstream that sends garbage', 17],
      ['open-cut', 'an OpenAI upstream that cuts the connection', null],
    ] as const) {
      it(`broken SSE from ${what}: an Anthropic error event, the call counted once, never below what was delivered`, async () => {
        const { project: own, client: own_client } = await tenant({ tokens_per_minute: 1_000_000 });
        const response = await rawMessages(own, { model, max_tokens: 300, messages: hello, stream: true });
        expect(response.status).toBe(200);
        const reserved = Number(response.headers.get('x-ratelimit-limit-tokens')) - Number(response.headers.get('x-ratelimit-remaining-tokens'));
        const events = sseEvents(await response.text());
        expect(events[0]!.event).toBe('message_start');
        expect(events.filter((event) => event.event === 'content_block_delta' && !('unparsed' in event.data))).toHaveLength(2);
        expect(events.at(-1)!.event, JSON.stringify(events.slice(-3))).toBe('error');
        expect(events.at(-1)!.data).toMatchObject({ type: 'error', error: { type: expect.any(String), message: expect.any(String) } });
        expect(events.some((event) => event.event === 'message_stop')).toBe(false);

        // The SDK raises it.
        await expect(own_client.messages.stream({ model, max_tokens: 300, messages: hello }).finalMessage()).rejects.toThrow();

        const usage = await settledUsage(own, model, 2);
        expect(usage.requests).toBe(2);
        // Each is charged its reservation (docs/limits-and-usage.md: a reply that broke off), or no less
        // than what it delivered: the input message_start reported and the two text deltas.
        const each = usage.tokens.total / 2;
        const delivered = input !== null && each >= input + 2 && each <= reserved;
        expect(each === reserved || delivered, `charged ${usage.tokens.total} for two calls; reservation ${reserved} each`).toBe(true);
      }, 30_000);
    }
  });
});
