import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { responseHistoryTokens } from '../../src/model-call/response-history.js';
import type { BufferedUsageMeter } from '../../src/quota/buffered-usage-meter.js';
import type { Store } from '../../src/store/types.js';
import { MINUTE_MS } from '../../src/store/usage-types.js';
import { buildTestApp, createProject, createTestStore, errorOf, type TestApp, type TestProject } from '../support/test-app.js';

const USAGE = { input_tokens: 50, output_tokens: 60, total_tokens: 110 };

interface Background {
  polls: number;
  /** Stays in_progress until released (the test decides when it ends). */
  held: boolean;
  status: string;
}

/**
 * A Responses backend as OpenAI runs background mode: POST /responses with `background: true`
 * answers `queued` with no usage; GET /responses/{id} answers `in_progress` a few times, then
 * `completed` with its usage. It also replays (stream=true), lists input items and cancels.
 */
class ResponsesBackend {
  readonly responses = new Map<string, Background>();
  readonly requests: { method: string; path: string }[] = [];
  /** Background responses stay in progress until released. */
  holdNew = false;
  private sequence = 0;

  private constructor(private readonly server: Server) {}

  static async start(): Promise<ResponsesBackend> {
    const server = createServer();
    const backend = new ResponsesBackend(server);
    server.on('request', (request: IncomingMessage, response: ServerResponse) => void backend.handle(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return backend;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  release(id: string): void {
    this.responses.get(id)!.held = false;
  }

  pollsOf(id: string): number {
    return this.responses.get(id)?.polls ?? 0;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private object(id: string, status: string): Record<string, unknown> {
    const ended = status !== 'queued' && status !== 'in_progress';
    return { id, object: 'response', created_at: 1_700_000_000, status, background: true, model: 'served-bg', output: [], usage: ended ? USAGE : null };
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of request) raw += String(chunk);
    const url = new URL(request.url!, 'http://backend');
    this.requests.push({ method: request.method!, path: url.pathname + url.search });
    const json = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (request.method === 'POST' && url.pathname === '/v1/responses') {
      const body = JSON.parse(raw || '{}') as Record<string, unknown>;
      const id = `resp_bg${++this.sequence}`;
      if (body.background === true) {
        this.responses.set(id, { polls: 0, held: this.holdNew, status: 'queued' });
        return json(200, this.object(id, 'queued'));
      }
      this.responses.set(id, { polls: 0, held: false, status: 'completed' });
      if (body.stream !== true) return json(200, this.object(id, 'completed'));
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(`event: response.created\ndata: ${JSON.stringify({ type: 'response.created', response: this.object(id, 'in_progress') })}\n\n`);
      return void response.end(`event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', response: this.object(id, 'completed') })}\n\n`);
    }
    const stored = /^\/v1\/responses\/([^/]+)(\/input_items|\/cancel)?$/.exec(url.pathname);
    const entry = stored ? this.responses.get(stored[1]!) : undefined;
    if (!stored || !entry) return json(404, { error: { message: 'not found', type: 'invalid_request_error', code: null } });
    const id = stored[1]!;
    if (stored[2] === '/input_items') return json(200, { object: 'list', data: [], first_id: null, last_id: null, has_more: false });
    if (stored[2] === '/cancel') {
      entry.held = false;
      return json(200, this.object(id, entry.status));
    }
    if (url.searchParams.get('stream') === 'true') {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      return void response.end(`event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', response: this.object(id, entry.status) })}\n\n`);
    }
    entry.polls++;
    if (entry.status !== 'completed') entry.status = entry.held || entry.polls < 3 ? 'in_progress' : 'completed';
    json(200, this.object(id, entry.status));
  }
}

/** Issue 29 item 4: a background response holds its reservation until it ends, and is charged once then. */
describe('background Responses (redis)', () => {
  let backend: ResponsesBackend;
  const open: TestApp[] = [];

  beforeAll(async () => {
    backend = await ResponsesBackend.start();
  });
  afterEach(async () => {
    backend.holdNew = false;
    for (const t of open.splice(0)) await t.close();
  });
  afterAll(async () => {
    await backend?.close();
  });

  async function gateway(responses: Record<string, number> = {}, store?: Store): Promise<TestApp> {
    const config = defaultConfig({
      models: [
        { id: 'echo-1', provider: 'echo' },
        { id: 'bg-1', upstream: backend.baseUrl, endpoints: ['responses'] },
      ],
      responses: { background_poll_ms: 10, background_max_ms: 60_000, ...responses },
      usage: { flush_interval_ms: 60_000 },
      ceilings: {},
    });
    const t = await buildTestApp('redis', { config, store });
    open.push(t);
    return t;
  }

  const create = (t: TestApp, project: TestProject, extra: Record<string, unknown> = {}) =>
    t.app.inject({
      method: 'POST',
      url: '/v1/responses',
      headers: project.auth,
      payload: { model: 'bg-1', input: 'Write a long report.', background: true, max_output_tokens: 2000, ...extra },
    });
  const chat = (t: TestApp, project: TestProject, maxTokens = 10) =>
    t.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: project.auth, payload: { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens } });

  /** nova_background_responses_total by outcome. */
  async function outcomes(t: TestApp): Promise<Record<string, number>> {
    const metric = t.ctx.metrics.registry.getSingleMetric('nova_background_responses_total');
    const counts: Record<string, number> = {};
    for (const { labels, value } of (await metric?.get())?.values ?? []) counts[String(labels.outcome)] = value;
    return counts;
  }

  /** The project's tokens per the usage records in the store (after the meter's flush). */
  async function tokensUsed(t: TestApp, store: Store, projectId: string): Promise<{ prompt: number; completion: number }> {
    await (t.ctx.usage as BufferedUsageMeter).flush();
    const buckets = await store.usage.buckets(projectId, 'minute', Date.now() - 10 * MINUTE_MS, Date.now() + MINUTE_MS);
    return {
      prompt: buckets.reduce((sum, bucket) => sum + bucket.counts.promptTokens, 0),
      completion: buckets.reduce((sum, bucket) => sum + bucket.counts.completionTokens, 0),
    };
  }

  /** A quota metric's value for the project. */
  async function quotaMetric(t: TestApp, name: string, projectId: string): Promise<number> {
    const values = (await t.ctx.metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
    return values.find((value) => value.labels.project_id === projectId)?.value ?? 0;
  }

  it('charges a background response once, with its real usage, when it completes; reading it back changes nothing', async () => {
    const t = await gateway();
    const project = await createProject(t.app, { name: 'bg', daily_tokens: 1_000_000 });
    const created = await create(t, project);
    expect(created.statusCode, created.body).toBe(200);
    expect(created.json()).toMatchObject({ status: 'queued', usage: null, model: 'bg-1' });
    const id = created.json().id as string;

    await expect.poll(() => outcomes(t)).toEqual({ usage: 1 });
    expect(backend.pollsOf(id)).toBe(3);
    expect(backend.requests.filter((request) => request.path === `/v1/responses/${id}`).every((request) => request.method === 'GET')).toBe(true);
    expect(await tokensUsed(t, t.store, project.projectId)).toEqual({ prompt: 50, completion: 60 });
    await expect.poll(() => quotaMetric(t, 'nova_quota_tokens_settled_total', project.projectId)).toBe(110);
    // A request continuing it is charged its history.
    await expect.poll(() => responseHistoryTokens(t.ctx, project.projectId, { previous_response_id: id })).toBe(110);

    // Reading it back (JSON, replayed stream, input items) and cancelling it are not model calls.
    for (const url of [`/v1/responses/${id}`, `/v1/responses/${id}?stream=true`, `/v1/responses/${id}/input_items`]) {
      expect((await t.app.inject({ url, headers: project.auth })).statusCode, url).toBe(200);
    }
    expect((await t.app.inject({ method: 'POST', url: `/v1/responses/${id}/cancel`, headers: project.auth })).statusCode).toBe(200);
    expect(await tokensUsed(t, t.store, project.projectId)).toEqual({ prompt: 50, completion: 60 });
    expect(await quotaMetric(t, 'nova_quota_tokens_settled_total', project.projectId)).toBe(110);
    expect(await outcomes(t)).toEqual({ usage: 1 });
  });

  it('holds the concurrency slot while the response runs, and frees it when it completes', async () => {
    const t = await gateway();
    const project = await createProject(t.app, { name: 'bg', max_concurrent_requests: 1 });
    backend.holdNew = true;
    const created = await create(t, project);
    expect(created.statusCode, created.body).toBe(200);
    const id = created.json().id as string;
    await expect.poll(() => backend.pollsOf(id)).toBeGreaterThanOrEqual(1);

    // The response was answered long ago; its slot is still held.
    expect(errorOf(await chat(t, project))).toMatchObject({ status: 429, code: 'concurrency_limit_exceeded' });
    backend.release(id);
    await expect.poll(() => outcomes(t)).toEqual({ usage: 1 });
    await expect.poll(async () => (await chat(t, project)).statusCode).toBe(200);
  });

  it('keeps a daily budget charged the reservation while the response runs, then its real usage', async () => {
    const t = await gateway();
    const project = await createProject(t.app, { name: 'bg', daily_tokens: 3000 });
    backend.holdNew = true;
    const created = await create(t, project);
    expect(created.statusCode, created.body).toBe(200);
    const id = created.json().id as string;
    await expect.poll(() => backend.pollsOf(id)).toBeGreaterThanOrEqual(1);

    // 2000 output tokens (and the prompt) are held: 1500 more do not fit the 3000 of the day.
    expect(errorOf(await chat(t, project, 1500))).toMatchObject({ status: 429, code: 'insufficient_quota' });
    backend.release(id);
    await expect.poll(() => outcomes(t)).toEqual({ usage: 1 });
    // 110 used: now they do.
    await expect.poll(async () => (await chat(t, project, 1500)).statusCode).toBe(200);
  });

  it('charges the reservation when the bound passes, and stops following', async () => {
    const t = await gateway({ background_max_ms: 200 });
    const project = await createProject(t.app, { name: 'bg', daily_tokens: 1_000_000, max_concurrent_requests: 1 });
    backend.holdNew = true;
    const created = await create(t, project);
    expect(created.statusCode, created.body).toBe(200);

    await expect.poll(() => outcomes(t)).toEqual({ bound: 1 });
    const reserved = await quotaMetric(t, 'nova_quota_tokens_reserved_total', project.projectId);
    expect(reserved).toBeGreaterThan(2000);
    expect(await quotaMetric(t, 'nova_quota_tokens_settled_total', project.projectId)).toBe(reserved);
    const used = await tokensUsed(t, t.store, project.projectId);
    expect(used.prompt + used.completion).toBe(reserved);
    expect(used.completion).toBe(2000);
    // Its slot is free again.
    expect((await chat(t, project)).statusCode).toBe(200);
  });

  it('charges the reservation of the responses it follows when the gateway shuts down', async () => {
    const store = await createTestStore('redis');
    try {
      const t = await gateway({}, store);
      const project = await createProject(t.app, { name: 'bg', daily_tokens: 1_000_000 });
      backend.holdNew = true;
      const created = await create(t, project);
      expect(created.statusCode, created.body).toBe(200);
      await expect.poll(() => backend.pollsOf(created.json().id as string)).toBeGreaterThanOrEqual(1);

      await open.splice(open.indexOf(t), 1)[0]!.close();
      expect(await outcomes(t)).toEqual({ shutdown: 1 });
      const reserved = await quotaMetric(t, 'nova_quota_tokens_reserved_total', project.projectId);
      expect(reserved).toBeGreaterThan(2000);
      expect(await quotaMetric(t, 'nova_quota_tokens_settled_total', project.projectId)).toBe(reserved);
      // Written by the meter's last flush, after the follow-up was charged.
      const buckets = await store.usage.buckets(project.projectId, 'minute', Date.now() - 10 * MINUTE_MS, Date.now() + MINUTE_MS);
      expect(buckets.reduce((sum, bucket) => sum + bucket.counts.promptTokens + bucket.counts.completionTokens, 0)).toBe(reserved);
    } finally {
      await store.close();
    }
  });
});
