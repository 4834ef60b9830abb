import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BufferedUsageMeter } from '../../src/quota/buffered-usage-meter.js';
import { chat, chatConfig, chatEnv } from '../support/chat-fixtures.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { buildTestApp, createProject, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';
import type { UsageAnswer } from '../support/usage-answer.js';

const NO_REFUSALS = { requests: 0, tokens: 0, concurrency: 0, budget: 0 };

/** Refused and failed model requests reach the usage buckets through the app: refusals by limit, errors (docs/limits-and-usage.md, "Usage"). */
describe.each(STORE_KINDS)('refusals and errors in usage (%s)', (kind) => {
  let upstream: LoopbackUpstream;
  let t: TestApp;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({
      ok: { chunks: ['Hi', ' there'], promptTokens: 7 },
      broken: { status: 500 },
      cut: { chunks: ['a ', 'b ', 'c ', 'd '], chunkDelayMs: 20, closeAfterChunks: 2 },
    });
    t = await buildTestApp(kind, {
      config: chatConfig(upstream, [
        { id: 'ok-1', upstream: upstream.baseUrl('ok'), max_output_tokens: 100 },
        { id: 'broken-1', upstream: upstream.baseUrl('broken'), max_output_tokens: 100 },
        { id: 'cut-1', upstream: upstream.baseUrl('cut'), max_output_tokens: 100 },
      ]),
      deps: { env: chatEnv },
    });
  });
  afterAll(async () => {
    await t?.close();
    await upstream?.close();
  });

  const usageOf = async (project: TestProject, query: string) => {
    await (t.ctx.usage as BufferedUsageMeter).flush();
    const response = await t.app.inject({ url: `/v1/projects/${project.projectId}/usage${query}`, headers: project.auth });
    expect(response.statusCode, response.body).toBe(200);
    return response.json() as UsageAnswer;
  };
  const ask = (project: TestProject, model: string, extra: Record<string, unknown> = {}) =>
    chat(t.app, project.auth, { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 10, ...extra });

  it('counts a requests_per_minute refusal and an upstream 500 and a broken stream under their models, not a refusal as a request', async () => {
    const project = await createProject(t.app, { name: 'refusals', rate_limits: { requests_per_minute: 3, burst_limit: 0 } });
    expect((await ask(project, 'ok-1')).statusCode).toBe(200);
    expect((await ask(project, 'broken-1')).statusCode).toBe(502);
    const stream = await ask(project, 'cut-1', { stream: true });
    expect(stream.statusCode).toBe(200);
    expect(stream.body).toContain('upstream_error');
    const refused = await ask(project, 'ok-1');
    expect(refused.statusCode, refused.body).toBe(429);

    const usage = await usageOf(project, '?group_by=model&bucket_width=1h');
    const row = (model: string | null) => usage.groups!.find((group) => group.model === model);
    expect(row('ok-1')).toMatchObject({ requests: 1, errors: 0, refusals: { ...NO_REFUSALS, requests: 1 } });
    expect(row('broken-1')).toMatchObject({ requests: 1, errors: 1, refusals: NO_REFUSALS });
    expect(row('cut-1')).toMatchObject({ requests: 1, errors: 1, refusals: NO_REFUSALS });
    expect(usage.refusals).toEqual({ ...NO_REFUSALS, requests: 1 });
    expect(usage.errors).toBe(2);
    const buckets = usage.buckets!.filter((bucket) => bucket.errors > 0 || bucket.refusals.requests > 0);
    expect(buckets.reduce((sum, bucket) => sum + bucket.errors, 0)).toBe(2);
    expect(buckets.flatMap((bucket) => bucket.groups!).find((group) => group.model === 'ok-1')?.refusals.requests).toBe(1);

    const byKey = await usageOf(project, '?group_by=api_key');
    expect(byKey.groups!.find((group) => group.api_key === project.keyId)).toMatchObject({ errors: 2, refusals: { ...NO_REFUSALS, requests: 1 } });
  });

  it('counts a tokens_per_minute refusal as a tokens refusal', async () => {
    const project = await createProject(t.app, { name: 'tokens', rate_limits: { tokens_per_minute: 50 } });
    const refused = await ask(project, 'ok-1', { max_tokens: 90 });
    expect(refused.statusCode, refused.body).toBe(429);
    const usage = await usageOf(project, '?group_by=model');
    expect(usage.groups!.find((group) => group.model === 'ok-1')).toMatchObject({ requests: 0, errors: 0, refusals: { ...NO_REFUSALS, tokens: 1 } });
  });
});
