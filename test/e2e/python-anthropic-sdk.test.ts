import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { pythonTools } from '../../scripts/python-tools.mjs';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { LoopbackUpstream, PLAIN_ANSWER, SDK_BACKEND, WEATHER_ANSWER, words } from '../support/loopback-upstream.js';
import { MessagesUpstream, TOOL_INPUT } from '../support/messages-upstream.js';

const run = promisify(execFile);
const SCRIPT = new URL('./python/anthropic_client_check.py', import.meta.url).pathname;
const UPSTREAM_KEY = `sk-ant-upstream-${randomBase62(24)}`;
const NATIVE_ANSWER = 'Native messages answer here.';
/**
 * NOVA_TEST_PYTHON: a Python of one's own with the anthropic SDK; else the tests' virtualenv of
 * test/python-requirements.txt, made on the suite's first run on a machine (scripts/python-tools.mjs).
 */
const python = async () => process.env.NOVA_TEST_PYTHON || (await pythonTools()).python;

/**
 * Issue 31's acceptance with the official Python `anthropic` SDK (test/python-requirements.txt),
 * through its own methods, against the real process, a real Redis, a native Messages upstream
 * (`api: anthropic`) and an OpenAI-only one (`api: openai`, translated): DESIGN section 8.
 */
describe('Python anthropic SDK against the gateway (real process, real Redis)', () => {
  let messagesUp: MessagesUpstream;
  let openUp: LoopbackUpstream;
  let gateway: GatewayProcess;

  // The virtualenv is made here, with time for pip; when that fails, the test fails with it.
  beforeAll(() => python().catch(() => undefined), 600_000);

  beforeAll(async () => {
    messagesUp = await MessagesUpstream.start({
      native: { text: words(NATIVE_ANSWER), inputTokens: 5, cacheReadTokens: 100, cacheWriteTokens: 20 },
      limited: { status: 429, headers: { 'retry-after': '1' } },
      flaky: { status: 429, statusTimes: 1, headers: { 'retry-after': '1' } },
    });
    openUp = await LoopbackUpstream.start({ default: SDK_BACKEND });
    const native = (id: string, scenario: string) => `
  - id: ${id}
    api: anthropic
    upstream: ${messagesUp.baseUrl(scenario)}
    upstream_model: vendor/${scenario}-model
    api_key_env: E2E_ANTHROPIC_KEY
    endpoints: [messages]`;
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: `admin-${randomBase62(20)}`, E2E_ANTHROPIC_KEY: UPSTREAM_KEY, LOG_LEVEL: 'warn' },
      configYaml: `
models:${native('claude-native', 'native')}
  - id: open-chat
    upstream: ${openUp.baseUrl()}
    upstream_model: backend/open
    endpoints: [chat, messages]${native('native-limited', 'limited')}${native('native-flaky', 'flaky')}
redis:
  key_prefix: pyan${randomBase62(8)}
`,
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    await messagesUp?.close();
    await openUp?.close();
  });

  it('creates, streams, loops over tools on both kinds of upstream, counts tokens, lists models, raises its errors, retries a 429', async () => {
    const { secret } = await gateway.createProject({ name: 'python-anthropic' });
    const { stdout } = await run(await python(), [SCRIPT], {
      env: {
        ...process.env,
        NOVA_BASE_URL: gateway.url,
        NOVA_API_KEY: secret,
        NOVA_NATIVE_MODEL: 'claude-native',
        NOVA_OPEN_MODEL: 'open-chat',
        NOVA_LIMITED_MODEL: 'native-limited',
        NOVA_FLAKY_MODEL: 'native-flaky',
      },
      timeout: 90_000,
    });
    const result = JSON.parse(stdout) as Record<string, Record<string, unknown>>;

    expect(result.create).toEqual({
      'claude-native': {
        model: 'claude-native',
        text: NATIVE_ANSWER,
        stop_reason: 'end_turn',
        usage: { input_tokens: 5, output_tokens: 4, cache_read_input_tokens: 100, cache_creation_input_tokens: 20 },
      },
      'open-chat': {
        model: 'open-chat',
        text: PLAIN_ANSWER,
        stop_reason: 'end_turn',
        usage: { input_tokens: 9, output_tokens: 4, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
      },
    });
    expect(result.stream).toEqual({
      'claude-native': { model: 'claude-native', text: NATIVE_ANSWER, stop_reason: 'end_turn', output_tokens: 4 },
      'open-chat': { model: 'open-chat', text: PLAIN_ANSWER, stop_reason: 'end_turn', output_tokens: 4 },
    });
    // The Python SDK 2.x sends its api_key as a bearer token (like the TypeScript SDK 1.x); the upstream gets the gateway's key.
    const auth = result.auth as Record<string, string | null>;
    expect(auth).toMatchObject({ 'x-api-key': null, authorization: `Bearer ${secret}` });
    expect(messagesUp.requestsOf('native')[0]!.headers['x-api-key']).toBe(UPSTREAM_KEY);
    expect(messagesUp.requestsOf('native')[0]!.headers['anthropic-version']).toBe(auth['anthropic-version']);

    const loop = (model: string) => ({
      first: { stop_reason: 'tool_use', tool: 'get_weather', input: TOOL_INPUT },
      second: { stop_reason: 'end_turn', text: WEATHER_ANSWER, model },
    });
    expect(result.tool_loops).toEqual({
      'claude-native json': loop('claude-native'),
      'claude-native streamed': loop('claude-native'),
      'open-chat json': loop('open-chat'),
      'open-chat streamed': loop('open-chat'),
    });

    const counted = result.count_tokens as Record<string, number>;
    expect(counted['claude-native']).toBe(125);
    expect(Number.isInteger(counted['open-chat']) && counted['open-chat']! > 0).toBe(true);
    expect(openUp.requests.some((request) => request.route.includes('count'))).toBe(false);

    expect(result.models).toMatchObject({ types: ['model'], small_page_has_more: true, retrieved: { type: 'model', id: 'open-chat' } });
    expect(result.models!.ids).toEqual(expect.arrayContaining(['claude-native', 'open-chat', 'native-limited', 'native-flaky']));
    expect(result.models!.paged).toEqual(result.models!.ids);

    expect(result.errors).toMatchObject({
      '401': { class: 'AuthenticationError', status: 401, body: { type: 'error', error: { type: 'authentication_error' } } },
      '404': { class: 'NotFoundError', status: 404, body: { type: 'error', error: { type: 'not_found_error' } } },
      '400': { class: 'BadRequestError', status: 400, body: { type: 'error', error: { type: 'invalid_request_error' } } },
      '429': { class: 'RateLimitError', status: 429, body: { type: 'error', error: { type: 'rate_limit_error' } }, retry_after: '1' },
    });

    const retry = result.retry as { text: string; statuses: number[]; retry_after: Array<string | null>; gaps_ms: number[] };
    expect(retry).toMatchObject({ text: PLAIN_ANSWER, statuses: [429, 200] });
    expect(retry.retry_after[0]).toBe('1');
    expect(retry.gaps_ms[0]).toBeGreaterThanOrEqual(950);
    const tries = messagesUp.requestsOf('flaky');
    expect(tries).toHaveLength(2);
    expect(tries[1]!.receivedAt - tries[0]!.receivedAt).toBeGreaterThanOrEqual(950);
  }, 120_000);
});
