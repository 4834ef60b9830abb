import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { LoopbackUpstream, SDK_BACKEND, WEATHER_ANSWER, words } from '../support/loopback-upstream.js';
import { MessagesUpstream } from '../support/messages-upstream.js';
import { settle } from '../support/replica-pair.js';
import type { TestProject } from '../support/test-app.js';
import type { UsageAnswer } from '../support/usage-answer.js';

const ROOT = new URL('../../', import.meta.url).pathname;
/** The devDependency's binary (.ci/run makes sure its native build is in place). */
const CLAUDE = join(ROOT, 'node_modules', '.bin', 'claude');
const UPSTREAM_KEY = `sk-ant-upstream-${randomBase62(24)}`;
const NATIVE_ANSWER = 'Hi from the native backend.';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * Issue 31's acceptance with Claude Code itself (`@anthropic-ai/claude-code`, 2.1.x): `claude -p`
 * with ANTHROPIC_BASE_URL set to the real gateway process (real Redis), through a native Messages
 * upstream (`api: anthropic`, its own `claude-…` ids resolved by an alias) and through an OpenAI-only
 * one (`api: openai`, translated), exits 0 and prints the upstream's answer. What it sends (DESIGN
 * section 8): `POST /v1/messages?beta=true`, always streaming, `x-api-key`, `anthropic-version`,
 * `anthropic-beta`, a `system` message inside `messages` (resent without it on a 400 that says
 * "Input should be 'user' or 'assistant'"), `thinking`, `context_management`, `output_config`,
 * tools with `defer_loading`, and 128k `max_tokens`.
 */
describe('Claude Code through the gateway (real process, real Redis)', () => {
  let messagesUp: MessagesUpstream;
  let openUp: LoopbackUpstream;
  let gateway: GatewayProcess;
  let project: TestProject;
  const homes: string[] = [];

  beforeAll(async () => {
    messagesUp = await MessagesUpstream.start({
      native: { text: words(NATIVE_ANSWER), inputTokens: 40, cacheReadTokens: 9000, cacheWriteTokens: 3000 },
      // A backend that refuses a system role in `messages`, as Anthropic's validation words it.
      strict: { text: words(NATIVE_ANSWER), strictRoles: true },
    });
    openUp = await LoopbackUpstream.start({ default: SDK_BACKEND });
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: `admin-${randomBase62(20)}`, E2E_ANTHROPIC_KEY: UPSTREAM_KEY, LOG_LEVEL: 'warn' },
      configYaml: `
models:
  - id: claude-native
    api: anthropic
    upstream: ${messagesUp.baseUrl('native')}
    upstream_model: vendor/native-model
    api_key_env: E2E_ANTHROPIC_KEY
    endpoints: [messages]
    aliases: ['claude-*']
    reserve_output_tokens_max: 8192
  - id: native-strict
    api: anthropic
    upstream: ${messagesUp.baseUrl('strict')}
    api_key_env: E2E_ANTHROPIC_KEY
    endpoints: [messages]
  - id: open-chat
    upstream: ${openUp.baseUrl()}
    upstream_model: backend/open
    endpoints: [chat, messages]
    reserve_output_tokens_max: 8192
redis:
  key_prefix: cc${randomBase62(8)}
usage:
  flush_interval_ms: 200
`,
    });
    // A token rate, as a team would set one: Claude Code's 128k max_tokens must still get through.
    project = await gateway.createProject({ name: 'claude-code', tokens_per_minute: 200_000 });
  });

  afterAll(async () => {
    await gateway?.stop();
    await messagesUp?.close();
    await openUp?.close();
    for (const home of homes) rmSync(home, { recursive: true, force: true });
  });

  /**
   * `claude -p <prompt>` in a throw-away HOME and working directory, with only the environment it
   * needs: no telemetry, updates or other traffic (one connection: the gateway), no retries and no
   * non-streaming fallback (a failure is a quick exit 1 naming the API error, not minutes of backoff).
   */
  function claude(prompt: string, args: string[] = [], env: Record<string, string> = {}): Promise<Run> {
    const home = mkdtempSync(join(tmpdir(), 'nova-claude-home-'));
    homes.push(home);
    const started = Date.now();
    return new Promise((resolve) => {
      execFile(
        CLAUDE,
        ['-p', prompt, ...args],
        {
          cwd: home,
          timeout: 60_000,
          env: {
            PATH: process.env.PATH ?? '/usr/bin:/bin',
            HOME: home,
            ANTHROPIC_BASE_URL: gateway.url,
            ANTHROPIC_API_KEY: project.secret,
            DISABLE_TELEMETRY: '1',
            DISABLE_AUTOUPDATER: '1',
            DISABLE_ERROR_REPORTING: '1',
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
            CLAUDE_CODE_MAX_RETRIES: '0',
            CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK: '1',
            ...env,
          },
        },
        (error, stdout, stderr) => {
          const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
          resolve({ code, stdout, stderr, ms: Date.now() - started });
        },
      );
    });
  }

  const described = (run: Run) => `exit ${run.code} after ${run.ms} ms\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;

  /** A model's row of the project's usage, once `tokens` show (usage is flushed every 200 ms). */
  async function usageOf(model: string, tokens: number) {
    const read = async () => {
      const response = await fetch(`${gateway.url}/v1/projects/${project.projectId}/usage?group_by=model`, { headers: project.auth });
      return ((await response.json()) as UsageAnswer).groups?.find((group) => group.model === model);
    };
    return settle(read, (row) => (row?.tokens.total ?? 0) >= tokens, 10_000);
  }

  it('is installed', async () => {
    const version = await new Promise<string>((resolve, reject) =>
      execFile(CLAUDE, ['--version'], { timeout: 30_000 }, (error, stdout) => (error ? reject(error) : resolve(stdout))),
    );
    expect(version).toMatch(/^2\.1\.\d+ \(Claude Code\)/);
  });

  it('answers through a native Messages upstream under its own claude-… model id, the request passed on as written', async () => {
    const before = messagesUp.requestsOf('native').length;
    const run = await claude('say hi');
    expect(run.code, described(run)).toBe(0);
    expect(run.stdout.trim()).toBe(NATIVE_ANSWER);

    const sent = messagesUp.requestsOf('native').slice(before);
    expect(sent).toHaveLength(1);
    const request = sent[0]!;
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/native/v1/messages?beta=true');
    expect(request.headers['x-api-key']).toBe(UPSTREAM_KEY);
    expect(request.headers['anthropic-version']).toBe('2023-06-01');
    expect(String(request.headers['anthropic-beta'])).toContain('claude-code-20250219');
    const body = request.body as Record<string, unknown> & { messages: Array<{ role: string }>; tools: Array<Record<string, unknown>> };
    expect(body.model).toBe('vendor/native-model');
    expect(body.stream).toBe(true);
    // Its controls reach a native upstream untouched, the system message inside `messages` too.
    expect(body).toMatchObject({ thinking: { type: expect.any(String) }, context_management: expect.any(Object), output_config: expect.any(Object), metadata: expect.any(Object) });
    expect(body.max_tokens).toBeGreaterThanOrEqual(32_000);
    expect(body.messages.map((message) => message.role)).toContain('system');
    expect(body.tools.some((tool) => tool.defer_loading === true)).toBe(true);

    // Charged as the upstream reported it: input, cache reads and writes, 5 words out.
    const usage = await usageOf('claude-native', 40 + 9000 + 3000 + 5);
    expect(usage?.requests).toBe(1);
    expect(usage?.tokens).toMatchObject({ prompt: 40 + 9000 + 3000, completion: 5, cached_prompt: 9000, cache_write: 3000 });
  }, 90_000);

  it("resends without its system message when a native upstream refuses it, the upstream's words kept", async () => {
    const run = await claude('say hi', ['--model', 'native-strict']);
    expect(run.code, described(run)).toBe(0);
    expect(run.stdout.trim()).toBe(NATIVE_ANSWER);
    const sent = messagesUp.requestsOf('strict');
    expect(sent).toHaveLength(2);
    expect(sent[0]!.body.messages).toContainEqual(expect.objectContaining({ role: 'system' }));
    expect(sent[1]!.body.messages).not.toContainEqual(expect.objectContaining({ role: 'system' }));
  }, 90_000);

  it('answers through an OpenAI-only upstream (ANTHROPIC_MODEL naming the model): the system-role 400, then a tool turn', async () => {
    const before = openUp.requestsTo('/chat/completions').length;
    const run = await claude('say hi', [], { ANTHROPIC_MODEL: 'open-chat' });
    expect(run.code, described(run)).toBe(0);
    // The loopback backend calls get_weather whenever tools are offered; Claude Code, which has no such
    // tool, answers with an error tool_result, and the backend's answer to that is printed.
    expect(run.stdout.trim()).toBe(WEATHER_ANSWER);

    const chats = openUp.requestsTo('/chat/completions').slice(before);
    expect(chats).toHaveLength(2);
    const [first, second] = chats as [(typeof chats)[0], (typeof chats)[0]];
    expect(first.body).toMatchObject({ model: 'backend/open', stream: true, stream_options: { include_usage: true } });
    const tools = first.body.tools as Array<{ type: string; function: { name: string } }>;
    expect(tools.map((tool) => tool.function.name)).toContain('Bash');
    const roles = (first.body.messages as Array<{ role: string }>).map((message) => message.role);
    expect(roles[0]).toBe('system');
    expect(roles.slice(1)).toEqual(['user']);
    const last = (second.body.messages as Array<{ role: string; content: unknown }>).at(-1)!;
    expect(last.role).toBe('tool');
    expect(String(last.content)).toMatch(/^Error: /);

    // Two chat calls: 9 prompt tokens each, a tool call (6) and the five words of the answer; the
    // refused first call costs nothing.
    const usage = await usageOf('open-chat', 2 * 9 + 6 + 5);
    expect(usage?.tokens).toMatchObject({ prompt: 2 * 9, completion: 6 + 5, total: 2 * 9 + 6 + 5 });
  }, 90_000);
});
