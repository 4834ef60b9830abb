import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { asciiText, cjkText, toolsOfSize } from '../support/charge-fixtures.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { ReplicaPair, settle } from '../support/replica-pair.js';
import type { TestProject } from '../support/test-app.js';
import { VllmLikeUpstream, type UsageReport } from '../support/vllm-like-upstream.js';

const ADMIN_TOKEN = `charges-admin-${randomBase62(24)}`;
const FLUSH_MS = 200;
/** The gateway's default output bound (rate_limits.default_max_output_tokens). */
const DEFAULT_BOUND = 4096;
const USAGE_REPORTS: Exclude<UsageReport, 'honest'>[] = ['omit', 'negative', 'non-finite', 'string'];

type Limit = { tokens_per_minute: number } | { daily_tokens: number } | { monthly_tokens: number };
const limitOf = (policy: Limit) => Object.values(policy)[0] as number;
const nameOf = (policy: Limit) => Object.keys(policy)[0]!;

/**
 * Issue 29's acceptance ("Charges that hold", docs/limits-and-usage.md): every row of its table,
 * tried the way a hostile tenant would, on two real gateway processes sharing one Redis
 * (standalone, then a 3-master Cluster), in front of a backend that charges like vLLM (it honours
 * the largest max field and reports honest usage that counts tools and non-Latin text;
 * test/support/vllm-like-upstream.ts). The measure is the backend's own record of the tokens it
 * served: within a budget always; within a token rate plus its documented bound (none without
 * `reserve_output_tokens_max`: a reservation bounds what the upstream may charge); and a call
 * that went wrong (client gone, no or invalid usage) charged at least what was served.
 */
describe.each(['redis', 'cluster'] as const)('charges that hold: two processes on one %s', (kind) => {
  let cluster: RedisCluster | undefined;
  let upstream: VllmLikeUpstream;
  let pair: ReplicaPair;

  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
    upstream = await VllmLikeUpstream.start({
      fast: {},
      // Background responses complete 1.5 s after creation.
      bg: { backgroundMs: 1500 },
      // A stream of one token a chunk, 10 ms a token: a client can leave mid-stream (600 tokens: 6 s).
      paced: { msPerToken: 10, tokensPerChunk: 1 },
      // A JSON reply generated at 1 ms a token: 3,000 tokens take 3 s.
      slowjson: { msPerToken: 1 },
      ...Object.fromEntries(USAGE_REPORTS.map((usage) => [usage, { usage }])),
    });
    const configYaml = `
models:
  - id: vllm-1
    upstream: ${upstream.baseUrl('fast')}
    endpoints: [chat, completions, responses]
  - id: bounded-1
    upstream: ${upstream.baseUrl('fast')}
    max_output_tokens: 2000
    endpoints: [chat, completions, responses]
  - id: bg-1
    upstream: ${upstream.baseUrl('bg')}
    endpoints: [responses]
  - id: stream-abort-1
    upstream: ${upstream.baseUrl('paced')}
    timeout_ms: 60000
  - id: json-abort-1
    upstream: ${upstream.baseUrl('slowjson')}
    timeout_ms: 60000
${USAGE_REPORTS.map((usage) => `  - id: usage-${usage}-1\n    upstream: ${upstream.baseUrl(usage)}\n    endpoints: [chat, responses]`).join('\n')}
redis:
  key_prefix: ch${randomBase62(8)}
usage:
  flush_interval_ms: ${FLUSH_MS}
`;
    pair = await ReplicaPair.start({
      env: {
        REDIS_URL: kind === 'cluster' ? cluster!.url : inject('redisUrl'),
        REDIS_MODE: kind === 'cluster' ? 'cluster' : 'standalone',
        NOVA_ADMIN_TOKEN: ADMIN_TOKEN,
        LOG_LEVEL: 'warn',
      },
      configYaml,
    });
  }, 120_000);
  afterAll(async () => {
    await pair?.stop();
    await upstream?.close();
    await cluster?.stop();
  });

  /** A project of its own, and the tag its requests carry (the upstream's record is filtered by it). */
  async function tenant(policy: Record<string, unknown> = {}): Promise<{ project: TestProject; tag: string }> {
    const project = await pair.project(`charges-${kind}`, policy);
    return { project, tag: `[${project.projectId}]` };
  }

  /**
   * Fires `count` concurrent calls at a project held by `policy` and returns the tokens the upstream
   * served for them, with the statuses (each either served or refused with a 429).
   */
  async function attack(policy: Limit, count: number, bodyOf: (tag: string) => Record<string, unknown>, path = '/v1/chat/completions') {
    const { project, tag } = await tenant(policy);
    const answers = await pair.burst(project, count, () => bodyOf(tag), path);
    await upstream.waitIdle(tag);
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status !== 200 && status !== 429), JSON.stringify(answers.filter((a) => a.status !== 200 && a.status !== 429))).toEqual([]);
    return { served: upstream.servedTagged(tag), admitted: statuses.filter((status) => status === 200).length, statuses, project, tag };
  }

  /** The served tokens stay within the limit (a budget, or a token rate without a reserve cap: its documented bound adds nothing). */
  function expectHeld(policy: Limit, outcome: { served: number; admitted: number }, row: string) {
    const limit = limitOf(policy);
    console.info(`${kind}, ${row}: ${outcome.admitted} admitted, ${outcome.served} tokens served at ${nameOf(policy)} = ${limit}`);
    expect(outcome.admitted, `${row}: nothing was admitted at all`).toBeGreaterThan(0);
    expect(
      outcome.served,
      `${row}: the upstream served ${outcome.served} tokens to ${outcome.admitted} admitted requests, ${(outcome.served / limit).toFixed(2)}x ${nameOf(policy)} = ${limit}`,
    ).toBeLessThanOrEqual(limit);
  }

  const chat = (tag: string, extra: Record<string, unknown> = {}) => ({ model: 'vllm-1', messages: [{ role: 'user', content: `${tag} hi` }], ...extra });

  it('max_tokens: 1 with max_completion_tokens: 1000 (the upstream honours the larger): served tokens stay within a token rate and a daily budget', async () => {
    for (const policy of [{ tokens_per_minute: 5000 }, { daily_tokens: 5000 }]) {
      const outcome = await attack(policy, 20, (tag) => chat(tag, { max_tokens: 1, max_completion_tokens: 1000 }));
      expectHeld(policy, outcome, 'max_tokens 1 + max_completion_tokens 1000');
    }
  }, 60_000);

  it('n: 10 asks for ten choices: served tokens stay within a token rate and a monthly budget', async () => {
    for (const policy of [{ tokens_per_minute: 3000 }, { monthly_tokens: 3000 }]) {
      const outcome = await attack(policy, 10, (tag) => chat(tag, { max_tokens: 100, n: 10 }));
      expectHeld(policy, outcome, 'n: 10 x max_tokens 100');
    }
  }, 60_000);

  it("no max field: the model's bound is added to what is sent upstream, and served tokens stay within a token rate and a daily budget", async () => {
    // What is sent upstream: the model's max_output_tokens, else the default bound, in the field the route takes.
    const { project, tag } = await tenant();
    const calls: Array<[string, Record<string, unknown>, string, number]> = [
      ['/v1/chat/completions', chat(tag), 'max_tokens', DEFAULT_BOUND],
      ['/v1/chat/completions', chat(tag, { model: 'bounded-1' }), 'max_tokens', 2000],
      ['/v1/completions', { model: 'vllm-1', prompt: `${tag} once upon a time` }, 'max_tokens', DEFAULT_BOUND],
      ['/v1/responses', { model: 'vllm-1', input: `${tag} tell me more` }, 'max_output_tokens', DEFAULT_BOUND],
    ];
    for (const [path, body, field, bound] of calls) {
      const response = await pair.post(pair.next(), project, path, body);
      expect(response.status, await response.text()).toBe(200);
      const sent = upstream.requestsTagged(tag).at(-1)!;
      expect(sent.body[field], `${path} (${String(body.model)}) sent upstream without a max field`).toBe(bound);
      expect(sent.generatedTokens).toBe(bound);
    }
    for (const policy of [{ tokens_per_minute: 10_000 }, { daily_tokens: 10_000 }]) {
      const outcome = await attack(policy, 6, (tag) => chat(tag));
      expectHeld(policy, outcome, 'no max field (the upstream generates 6,000 tokens unbounded)');
    }
  }, 60_000);

  it('230 KB of tools with a short message: served tokens stay within a token rate and a daily budget', async () => {
    const tools = toolsOfSize(230_000);
    for (const policy of [{ tokens_per_minute: 300_000 }, { daily_tokens: 300_000 }]) {
      const outcome = await attack(policy, 8, (tag) => chat(tag, { tools, max_tokens: 50 }));
      expectHeld(policy, outcome, '230 KB of tools');
    }
  }, 60_000);

  it('continuing a stored conversation of 40 KB with a short message: served tokens stay within a token rate and a daily budget', async () => {
    for (const policy of [{ tokens_per_minute: 50_000 }, { daily_tokens: 50_000 }]) {
      const { project, tag } = await tenant();
      const first = await pair.post(pair.a, project, '/v1/chat/completions', {
        model: 'vllm-1',
        messages: [{ role: 'user', content: `${tag} ${asciiText(40_000)}` }],
        max_tokens: 5,
        store: true,
      });
      expect(first.status).toBe(200);
      const conversationId = ((await first.json()) as { conversation_id: string }).conversation_id;
      expect(conversationId).toMatch(/^conv_/);
      const stored = await settle(
        async () => ((await (await fetch(`${pair.b.url}/v1/conversations/${conversationId}`, { headers: project.auth })).json()) as { message_count?: number }).message_count,
        (count) => count === 2,
        5000,
      );
      expect(stored).toBe(2);
      await pair.patchProject(project, policy);
      const before = upstream.requestsTagged(tag).length;
      const answers = await pair.burst(project, 10, () => ({
        model: 'vllm-1',
        conversation_id: conversationId,
        store: false,
        messages: [{ role: 'user', content: `${tag} and then?` }],
        max_tokens: 5,
      }));
      await upstream.waitIdle(tag);
      const continuations = upstream.requestsTagged(tag).slice(before);
      const outcome = { served: upstream.served(continuations), admitted: answers.filter((answer) => answer.status === 200).length };
      expect(answers.filter((answer) => answer.status !== 200 && answer.status !== 429)).toEqual([]);
      expectHeld(policy, outcome, 'continuations of a 40 KB stored conversation');
    }
  }, 60_000);

  it('Responses with background: true hold their reservation until they complete, are charged once then, and a 30k budget binds', async () => {
    const budget = { monthly_tokens: 30_000 };
    const { project, tag } = await tenant(budget);
    const statuses: number[] = [];
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const response = await pair.post(pair.at(i), project, '/v1/responses', { model: 'bg-1', input: `${tag} write a long report`, background: true, max_output_tokens: 8000 });
      statuses.push(response.status);
      const body = (await response.json()) as { id?: string; status?: string };
      if (response.status === 200) {
        expect(body.status).toBe('queued');
        ids.push(body.id!);
      }
    }
    const served = upstream.servedTagged(tag);
    expectHeld(budget, { served, admitted: ids.length }, `background responses (statuses ${statuses.join(',')})`);

    // Charged once, with the upstream's usage at completion: the gateway follows the responses up itself.
    const charged = await settle(() => pair.usageTokens(project), (tokens) => tokens === served, 20_000);
    expect(charged, `charged ${charged} tokens for background responses that served ${served}`).toBe(served);
    // Reading them back (through either replica, twice) never counts again.
    for (const id of ids) {
      for (const gateway of [pair.a, pair.b]) {
        const read = await fetch(`${gateway.url}/v1/responses/${id}`, { headers: project.auth });
        expect(read.status).toBe(200);
        expect(((await read.json()) as { status: string }).status).toBe('completed');
      }
    }
    // Usage shows a request on every replica within flush_interval_ms + 1 s: wait that long for a second charge.
    await sleep(FLUSH_MS + 1000);
    expect(await pair.usageTokens(project)).toBe(served);
    // The budget is what the completed responses used: the next one (8,000 + its prompt) does not fit.
    const next = await pair.post(pair.b, project, '/v1/responses', { model: 'bg-1', input: `${tag} another`, background: true, max_output_tokens: 8000 });
    expect(next.status).toBe(429);
  }, 60_000);

  /**
   * What a project was charged for its one call to `model`, read from usage until it covers
   * `served` (a request's tokens are recorded when it settles, apart from its admission, and show
   * within flush + 1 s): the last read when it never does.
   */
  async function chargedForOneCall(project: TestProject, model: string, served: number): Promise<number> {
    const row = await settle(() => pair.usageOfModel(project, model), (value) => value.tokens >= served, 5000);
    expect(row.requests, `the call to ${model} never showed in usage`).toBe(1);
    return row.tokens;
  }

  it('CJK text, or tools, in a stream aborted before its usage chunk: charged at least what the upstream processed', async () => {
    const model = 'stream-abort-1';
    const before = await pair.metric('nova_charged_as_reserved_total', { gen_ai_request_model: model, reason: 'client_closed' });
    const variants: Array<[string, (tag: string) => Record<string, unknown>]> = [
      ['CJK text', (tag) => ({ messages: [{ role: 'user', content: `${tag} ${cjkText(6000)}` }] })],
      ['40 KB of tools', (tag) => ({ messages: [{ role: 'user', content: `${tag} which record?` }], tools: toolsOfSize(40_000) })],
    ];
    // One project a stream, so each is held to its own charge.
    for (const [i, [what, extra]] of variants.entries()) {
      const { project, tag } = await tenant();
      const controller = new AbortController();
      const body = { model, stream: true, stream_options: { include_usage: true }, max_tokens: 600, ...extra(tag) };
      const response = await pair.post(pair.at(i), project, '/v1/chat/completions', body, controller.signal);
      expect(response.status).toBe(200);
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      let seen = '';
      while ((seen.match(/"content":"tok /g) ?? []).length < 5) {
        const { value, done } = await reader.read();
        if (done) break;
        seen += decoder.decode(value, { stream: true });
      }
      controller.abort();
      expect(seen).not.toContain('"usage":{');
      // The gateway may cancel the upstream call, or read it on for its usage (6 s at most here).
      await upstream.waitIdle(tag, 30_000);
      const served = upstream.servedTagged(tag);
      const charged = await chargedForOneCall(project, model, served);
      console.info(`${kind}, stream of ${what} aborted: ${served} tokens served, ${charged} charged`);
      expect(charged, `a stream of ${what} aborted before its usage chunk charged ${charged} tokens; the upstream processed ${served}`).toBeGreaterThanOrEqual(served);
    }
    const counted = (await pair.metric('nova_charged_as_reserved_total', { gen_ai_request_model: model, reason: 'client_closed' })) - before;
    expect(counted, `nova_charged_as_reserved_total{reason="client_closed"} for ${model}`).toBeGreaterThanOrEqual(variants.length);
  }, 60_000);

  it('a non-stream call aborted after 1 s: charged at least what the upstream processed', async () => {
    const model = 'json-abort-1';
    const { project, tag } = await tenant();
    const before = await pair.metric('nova_charged_as_reserved_total', { gen_ai_request_model: model, reason: 'client_closed' });
    const controller = new AbortController();
    const body = { model, messages: [{ role: 'user', content: `${tag} ${asciiText(80_000)}` }], max_tokens: 3000 };
    const call = pair.post(pair.a, project, '/v1/chat/completions', body, controller.signal).then(
      (response) => response.status,
      (error: Error) => error.name,
    );
    await sleep(1000);
    controller.abort();
    expect(await call).toBe('AbortError');
    await upstream.waitIdle(tag);
    const served = upstream.servedTagged(tag);
    expect(served).toBeGreaterThan(20_000);
    const charged = await chargedForOneCall(project, model, served);
    console.info(`${kind}, aborted JSON call: ${served} tokens served, ${charged} charged`);
    expect(charged, `an aborted JSON call charged ${charged} tokens; the upstream processed ${served}`).toBeGreaterThanOrEqual(served);
    const counted = (await pair.metric('nova_charged_as_reserved_total', { gen_ai_request_model: model, reason: 'client_closed' })) - before;
    expect(counted, `nova_charged_as_reserved_total{reason="client_closed"} for ${model}`).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it.each(USAGE_REPORTS)('an upstream reply with %s usage (JSON, stream, Responses) is charged at least what was served', async (report) => {
    const model = `usage-${report}-1`;
    const reason = report === 'omit' ? 'usage_missing' : 'usage_invalid';
    const before = await pair.metric('nova_charged_as_reserved_total', { gen_ai_request_model: model, reason });
    const calls: Array<[string, string, (tag: string) => Record<string, unknown>]> = [
      ['JSON chat', '/v1/chat/completions', (tag) => ({ model, messages: [{ role: 'user', content: `${tag} summarise the ledger` }], max_tokens: 300 })],
      [
        'chat stream',
        '/v1/chat/completions',
        (tag) => ({ model, messages: [{ role: 'user', content: `${tag} summarise it again` }], max_tokens: 300, stream: true, stream_options: { include_usage: true } }),
      ],
      ['JSON response', '/v1/responses', (tag) => ({ model, input: `${tag} and as a response`, max_output_tokens: 300 })],
    ];
    // One project a call, so each is held to its own charge.
    for (const [i, [what, path, bodyOf]] of calls.entries()) {
      const { project, tag } = await tenant();
      const response = await pair.post(pair.at(i), project, path, bodyOf(tag));
      const text = await response.text();
      expect(response.status, `${what}: ${text}`).toBe(200);
      await upstream.waitIdle(tag);
      const served = upstream.servedTagged(tag);
      const charged = await chargedForOneCall(project, model, served);
      console.info(`${kind}, ${what} with ${report} usage: ${served} tokens served, ${charged} charged`);
      expect(charged, `${what} with ${report} usage: charged ${charged} tokens for ${served} served`).toBeGreaterThanOrEqual(served);
    }
    const counted = (await pair.metric('nova_charged_as_reserved_total', { gen_ai_request_model: model, reason })) - before;
    expect(counted, `nova_charged_as_reserved_total{reason="${reason}"} for ${model}`).toBeGreaterThanOrEqual(calls.length);
  }, 60_000);
});
