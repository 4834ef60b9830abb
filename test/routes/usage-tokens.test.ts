import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BufferedUsageMeter } from '../../src/quota/buffered-usage-meter.js';
import { chat, chatConfig, chatEnv } from '../support/chat-fixtures.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { buildTestApp, createProject, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';
import type { UsageAnswer } from '../support/usage-answer.js';

/** Prices of the `cached-1` model, in dollars per million tokens. */
const PRICES = { input_per_million: 2, output_per_million: 8, cached_input_per_million: 0.5 };
/** What the `cached` upstream reports: 2006 prompt tokens of which 1920 cached; 5 completion tokens (a token a chunk) of which 3 reasoning. */
const REPORTED = { prompt: 2006, cached: 1920, completion: 5, reasoning: 3 };
const COST = ((REPORTED.prompt - REPORTED.cached) * 2 + REPORTED.cached * 0.5 + REPORTED.completion * 8) / 1e6;

/** Issue 31 item 6: a call's cached and reasoning tokens reach its usage record and its cost, through the app. */
describe.each(STORE_KINDS)('cached and reasoning tokens in usage and cost (%s)', (kind) => {
  let upstream: LoopbackUpstream;
  let t: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({
      cached: { promptTokens: REPORTED.prompt, usageDetails: { cached_tokens: REPORTED.cached, reasoning_tokens: REPORTED.reasoning } },
      silent: { usage: false },
    });
    t = await buildTestApp(kind, {
      config: chatConfig(upstream, [
        { id: 'cached-1', upstream: upstream.baseUrl('cached'), max_output_tokens: 100, pricing: PRICES },
        { id: 'silent-1', upstream: upstream.baseUrl('silent'), max_output_tokens: 100, pricing: { ...PRICES, cache_write_per_million: 2.5 } },
      ]),
      deps: { env: chatEnv },
    });
  });
  afterAll(async () => {
    await t?.close();
    await upstream?.close();
  });

  const usageOf = async (query = '') => {
    await (t.ctx.usage as BufferedUsageMeter).flush();
    const response = await t.app.inject({ url: `/v1/projects/${project.projectId}/usage${query}`, headers: project.auth });
    expect(response.statusCode, response.body).toBe(200);
    return response.json() as UsageAnswer;
  };

  it('records a chat call with cached tokens as tokens.cached_prompt and costs them at the cached price, JSON and streamed', async () => {
    project = await createProject(t.app, { name: 'cached' });
    const json = await chat(t.app, project.auth, { model: 'cached-1', messages: [{ role: 'user', content: 'hi' }] });
    expect(json.statusCode, json.body).toBe(200);
    // The client sees the upstream's usage as it was, details included.
    expect(json.json().usage).toMatchObject({ prompt_tokens: REPORTED.prompt, prompt_tokens_details: { cached_tokens: REPORTED.cached } });
    const stream = await chat(t.app, project.auth, { model: 'cached-1', messages: [{ role: 'user', content: 'hi' }], stream: true });
    expect(stream.statusCode, stream.body).toBe(200);

    const usage = await usageOf('?group_by=model&bucket_width=1h');
    expect(usage.tokens).toEqual({
      prompt: 2 * REPORTED.prompt,
      completion: 2 * REPORTED.completion,
      total: 2 * (REPORTED.prompt + REPORTED.completion),
      cached_prompt: 2 * REPORTED.cached,
      cache_write: 0,
      reasoning: 2 * REPORTED.reasoning,
    });
    expect(usage.cost).toBeCloseTo(2 * COST, 15);
    // Not the price of the prompt all at the input price.
    expect(usage.cost).toBeLessThan((2 * (REPORTED.prompt * 2 + REPORTED.completion * 8)) / 1e6);
    const row = usage.groups!.find((group) => group.model === 'cached-1')!;
    expect(row.tokens).toMatchObject({ cached_prompt: 2 * REPORTED.cached, reasoning: 2 * REPORTED.reasoning });
    expect(row.cost).toBeCloseTo(2 * COST, 15);
    const buckets = usage.buckets!.filter((bucket) => bucket.tokens.total > 0);
    expect(buckets.reduce((sum, bucket) => sum + bucket.tokens.cached_prompt, 0)).toBe(2 * REPORTED.cached);
    expect(buckets.flatMap((bucket) => bucket.groups!).find((group) => group.model === 'cached-1')?.tokens.cached_prompt).toBe(2 * REPORTED.cached);
  });

  it('charges a call without usage its reservation, with no cached tokens, every prompt token at the dearest input price', async () => {
    project = await createProject(t.app, { name: 'silent' });
    const response = await chat(t.app, project.auth, { model: 'silent-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });
    expect(response.statusCode, response.body).toBe(200);
    const usage = await usageOf();
    expect(usage.tokens).toMatchObject({ completion: 10, cached_prompt: 0, cache_write: 0, reasoning: 0 });
    expect(usage.tokens.prompt).toBeGreaterThan(0);
    // The cache-write price (2.5) is the dearest input price of silent-1.
    expect(usage.cost).toBeCloseTo((usage.tokens.prompt * 2.5 + 10 * 8) / 1e6, 15);
  });
});
