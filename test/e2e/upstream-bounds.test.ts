import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { LoopbackUpstream, type UpstreamBehavior } from '../support/loopback-upstream.js';
import type { TestProject } from '../support/test-app.js';

const HUGE = 50 * 1024 * 1024;
const PIECE = Buffer.alloc(64 * 1024, 'x');
const FIRST_CHUNK = 'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n';

/**
 * An upstream that answers with 50 MB: one endless SSE event, a JSON body to a stream request, a
 * JSON body to a plain request. The gateway (limits: 64 KiB events, 256 KiB replies) must stop
 * each early, tell the client `upstream_error`, and keep its event loop free for probes.
 */
describe('bounded upstream replies (real process, real Redis)', () => {
  let upstream: LoopbackUpstream;
  let gateway: GatewayProcess;
  let project: TestProject;
  /** The bytes a scenario's request (the last, or the one at `index`) wrote, once its reply was over: the peer closed or all was sent. */
  const written = (scenario: string, index = -1) => {
    const request = upstream.requestsOf(scenario).at(index);
    return request?.closed ? request.bytesWritten : undefined;
  };

  beforeAll(async () => {
    /** HUGE bytes after `head`, honouring backpressure. */
    const pour = (contentType: string, head: string): UpstreamBehavior => ({
      headers: { 'content-type': contentType },
      flood: { head, piece: () => PIECE, count: HUGE / PIECE.length },
    });
    // Usage numbers no backend could mean: 1e300 prompt tokens, a negative completion count.
    const usage = '{"prompt_tokens":1e300,"completion_tokens":-4,"total_tokens":1e300}';
    upstream = await LoopbackUpstream.start({
      absurd: { body: `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}],"usage":${usage}}` },
      event: pour('text/event-stream', `${FIRST_CHUNK}data: {"choices":[{"delta":{"content":"`),
      'json-stream': pour('application/json', '{"choices":[{"message":{"content":"'),
      json: pour('application/json', '{"choices":[{"message":{"content":"'),
    });
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: `admin-${randomBase62(20)}` },
      configYaml: `
models:
  - id: event-1
    upstream: ${upstream.baseUrl('event')}
  - id: json-stream-1
    upstream: ${upstream.baseUrl('json-stream')}
  - id: json-1
    upstream: ${upstream.baseUrl('json')}
    endpoints: [chat, embeddings]
  - id: absurd-1
    upstream: ${upstream.baseUrl('absurd')}
  - id: echo-1
    provider: echo
usage:
  flush_interval_ms: 100
upstream:
  max_sse_event_bytes: 65536
  max_json_reply_bytes: 262144
redis:
  key_prefix: bounds${randomBase62(8)}
`,
    });
    project = await gateway.createProject({ name: 'bounds' });
  });

  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  const post = (path: string, body: Record<string, unknown>) =>
    fetch(`${gateway.url}/v1${path}`, { method: 'POST', headers: { ...project.auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const messages = [{ role: 'user', content: 'Hi' }];

  /** The slowest /livez answer while `work` runs. */
  async function slowestProbeDuring(work: Promise<unknown>): Promise<number> {
    let done = false;
    void work.finally(() => (done = true));
    let slowest = 0;
    while (!done) {
      const started = performance.now();
      await fetch(`${gateway.url}/livez`);
      slowest = Math.max(slowest, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await work;
    return slowest;
  }

  it('ends a stream with an upstream_error event at an event larger than the limit, and closes the upstream early', async () => {
    let text = '';
    const slowest = await slowestProbeDuring(
      post('/chat/completions', { model: 'event-1', messages, stream: true }).then(async (response) => {
        expect(response.status).toBe(200);
        text = await response.text();
      }),
    );
    const events = text.split('\n\n').filter(Boolean);
    expect(events[0]).toBe(FIRST_CHUNK.replace('"model":"m"', '"model":"event-1"').trimEnd());
    expect(JSON.parse(events.at(-1)!.slice('data: '.length))).toMatchObject({ error: { type: 'upstream_error', code: 'upstream_error' } });
    await expect.poll(() => written('event')).toBeLessThan(HUGE / 4);
    expect(slowest).toBeLessThan(500);
  });

  it('answers a stream request that got JSON back with an SSE error event, without reading the JSON', async () => {
    const response = await post('/chat/completions', { model: 'json-stream-1', messages, stream: true });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await response.text();
    expect(JSON.parse(text.trim().slice('data: '.length))).toMatchObject({ error: { type: 'upstream_error' } });
    await expect.poll(() => written('json-stream')).toBeLessThan(HUGE / 4);
  });

  it('answers 502 to a JSON reply over the limit, chat or pass-through, and closes the upstream early', async () => {
    for (const [path, body] of [
      ['/chat/completions', { model: 'json-1', messages }],
      ['/embeddings', { model: 'json-1', input: 'x' }],
    ] as const) {
      const index = upstream.requestsOf('json').length;
      const response = await post(path, body);
      expect(response.status).toBe(502);
      expect(await response.json()).toMatchObject({ error: { type: 'upstream_error', code: 'upstream_error' } });
      await expect.poll(() => written('json', index)).toBeLessThan(HUGE / 4);
    }
  });

  it('charges the reservation for absurd usage numbers from an upstream (counted), without losing any other record', async () => {
    const own = await gateway.createProject({ name: 'absurd usage' });
    const send = (body: Record<string, unknown>) =>
      fetch(`${gateway.url}/v1/chat/completions`, { method: 'POST', headers: { ...own.auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const series = 'nova_charged_as_reserved_total{gen_ai_request_model="absurd-1",reason="usage_invalid"}';
    const before = await metricValue(series);
    const absurd = await send({ model: 'absurd-1', messages });
    expect(absurd.status).toBe(200);
    const echoed = await send({ model: 'echo-1', messages: [{ role: 'user', content: 'four words right here' }] });
    expect(echoed.status).toBe(200);
    await expect.poll(() => metricValue(series), { timeout: 5000 }).toBe(before + 1);
    // The echo request's tokens (4 prompt, 4 completion), and the absurd one's reservation: its
    // prompt's 17 bytes and the default output bound, 4096.
    const start = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 60_000).toISOString();
    const readUsage = async () => {
      const response = await fetch(`${gateway.url}/v1/projects/${own.projectId}/usage?start_time=${start}`, { headers: own.auth });
      return ((await response.json()) as { tokens: { prompt: number; completion: number } }).tokens;
    };
    await expect.poll(readUsage, { timeout: 5000 }).toEqual({ prompt: 4 + 17, completion: 4 + 4096, total: 8 + 17 + 4096, cached_prompt: 0, cache_write: 0, reasoning: 0 });
  });

  async function metricValue(series: string): Promise<number> {
    const text = await (await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`)).text();
    const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
    return line ? Number(line.slice(series.length + 1)) : 0;
  }
});
