import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { pythonTools } from '../../scripts/python-tools.mjs';
import { randomBase62 } from '../../src/core/ids.js';
import { LoopbackUpstream, PLAIN_ANSWER, SDK_BACKEND, WEATHER_ANSWER } from '../support/loopback-upstream.js';
import { GatewayProcess } from '../support/gateway-process.js';

const run = promisify(execFile);
const SCRIPT = new URL('./python/openai_client_check.py', import.meta.url).pathname;
/**
 * NOVA_TEST_PYTHON: a Python of one's own with the openai SDK; else the tests' virtualenv of
 * test/python-requirements.txt, made on the suite's first run on a machine (scripts/python-tools.mjs).
 */
const python = async () => process.env.NOVA_TEST_PYTHON || (await pythonTools()).python;

/** The official Python openai SDK (test/python-requirements.txt) against the real process. */
describe('Python openai SDK against the gateway (real process, real Redis)', () => {
  let upstream: LoopbackUpstream;
  let gateway: GatewayProcess;

  // The virtualenv is made here, with time for pip (a minute or more); when that fails (what to
  // install), the test fails with it, and is counted as failed rather than skipped.
  beforeAll(() => python().catch(() => undefined), 600_000);

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({ default: SDK_BACKEND });
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: `admin-${randomBase62(20)}` },
      configYaml: `
models:
  - id: agent-1
    upstream: ${upstream.baseUrl()}
    upstream_model: backend/agent
    endpoints: [chat, completions, embeddings, responses]
redis:
  key_prefix: py${randomBase62(8)}
`,
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  it('runs a tool loop with a developer message, streams, embeds, completes and uses responses', async () => {
    const { secret } = await gateway.createProject({ name: 'python' });
    const { stdout } = await run(await python(), [SCRIPT], { env: { ...process.env, NOVA_BASE_URL: `${gateway.url}/v1`, NOVA_API_KEY: secret }, timeout: 60_000 });
    const result = JSON.parse(stdout) as Record<string, unknown>;
    expect(result).toEqual({
      tool_loop: { call: 'get_weather', answer: WEATHER_ANSWER, model: 'agent-1' },
      stream: { text: WEATHER_ANSWER, models: ['agent-1'] },
      embeddings: { vectors: [[0.25, -0.5, 0], [0.25, -0.5, 1]], prompt_tokens: 8 },
      completion: ' and so on.',
      responses: { text: PLAIN_ANSWER, model: 'agent-1', streamed: PLAIN_ANSWER, retrieved: true },
    });
    expect(upstream.requestsTo('/chat/completions')[0]!.body.messages).toContainEqual({ role: 'developer', content: 'Be brief.' });
  });
});
