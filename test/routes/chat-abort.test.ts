import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ModelConfig } from '../../src/config/schema.js';
import { ADMIN_TOKEN, buildTestApp, createProject, type TestApp, type TestProject } from '../support/test-app.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { chat, chatConfig, chatEnv, RecordingUsageMeter, sseData } from '../support/chat-fixtures.js';

const pieces = Array.from({ length: 10 }, (_, n) => ` w${n}`);

async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}

/** The app on a real port, its models on scenarios of `upstream`, what it meters recorded. */
async function listeningApp(upstream: LoopbackUpstream, models: ModelConfig[]) {
  const usage = new RecordingUsageMeter();
  const test = await buildTestApp('memory', { config: chatConfig(upstream, models), deps: { usage, env: chatEnv } });
  const base = await test.app.listen({ port: 0, host: '127.0.0.1' });
  return { test, usage, base, project: await createProject(test.app) };
}

/** A chat request over a real socket to the app at `base`, named by its x-request-id; `signal` aborts it. */
function postChat(base: string, project: TestProject, requestId: string, body: Record<string, unknown>, signal?: AbortSignal) {
  return fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...project.auth, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify(body),
    signal,
  });
}

describe('client disconnects and broken upstream streams (real sockets)', () => {
  let upstream: LoopbackUpstream;
  let test: TestApp;
  let project: TestProject;
  let usage: RecordingUsageMeter;
  let base: string;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({
      trickle: { chunks: pieces, hangAfterChunks: 3 },
      breaks: { chunks: pieces, closeAfterChunks: 2, chunkDelayMs: 10 },
      hangs: { hang: true },
    });
    ({ test, usage, base, project } = await listeningApp(upstream, [
      { id: 'trickle-1', upstream: upstream.baseUrl('trickle'), timeout_ms: 10_000 },
      { id: 'breaks-1', upstream: upstream.baseUrl('breaks') },
      { id: 'hangs-1', upstream: upstream.baseUrl('hangs'), timeout_ms: 10_000 },
      // One slot: a second request waits in the model's queue (src/model-call/target-fleet.ts).
      { id: 'queued-1', targets: [{ upstream: upstream.baseUrl('hangs'), max_concurrent: 1 }], timeout_ms: 10_000 },
    ]));
  });
  afterAll(async () => {
    await test.close();
    await upstream.close();
  });

  it('a client that leaves while its admission is decided gets its concurrency slot and token charge back, and no upstream call', async () => {
    const own = await createProject(test.app, { name: 'leaves during admission' });
    const patched = await test.app.inject({
      method: 'PATCH',
      url: `/admin/v1/projects/${own.projectId}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { max_concurrent_requests: 1, tokens_per_minute: 1000 },
    });
    expect(patched.statusCode).toBe(200);
    const admission = test.ctx.admission;
    const admit = admission.admit.bind(admission);
    let admitted!: () => void;
    const decided = new Promise<void>((resolve) => (admitted = resolve));
    // The store's decision arrives after the client has gone (a slow store, as under load).
    admission.admit = async (...args) => {
      await sleep(200);
      try {
        return await admit(...args);
      } finally {
        admission.admit = admit;
        setImmediate(admitted);
      }
    };
    const before = upstream.requests.length;
    const body = JSON.stringify({ model: 'trickle-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });
    const socket = connect((test.app.server.address() as AddressInfo).port, '127.0.0.1', () => {
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: ${own.auth.authorization}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
      setTimeout(() => socket.destroy(), 50);
    });
    await decided;
    await sleep(50);
    expect(upstream.requests.length).toBe(before);
    // The slot is free and nothing stays reserved: the next request is admitted with the whole token rate left
    // but its own 27 (its prompt's 17 bytes of keys and strings, and max_tokens 10).
    const next = await test.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: own.auth, payload: { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 } });
    expect(next.statusCode).toBe(200);
    expect(next.headers['x-ratelimit-remaining-tokens']).toBe('973');
  });

  it('a client that aborts mid-stream closes the upstream request and is charged its whole reservation, once', async () => {
    const controller = new AbortController();
    const response = await postChat(base, project, 'req-abort-stream', { model: 'trickle-1', messages: [{ role: 'user', content: 'Tell me a long story' }], stream: true }, controller.signal);
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    let text = '';
    while ((text.match(/"content":" w/g) ?? []).length < 3) {
      const { value } = await reader.read();
      text += new TextDecoder().decode(value);
    }
    controller.abort();
    await upstream.waitFor(() => upstream.requestsOf('trickle')[0]?.aborted === true);
    await until(() => usage.of('req-abort-stream').length > 0);
    await sleep(100);
    const records = usage.of('req-abort-stream');
    expect(records).toHaveLength(1);
    // The usage chunk never came: the prompt's bytes (35) and the default output bound (4096), not the 3 tokens seen.
    expect(records[0]).toMatchObject({ model: 'trickle-1', promptTokens: 35, completionTokens: 4096, storageBytesDelta: 0 });
    const charged = await test.ctx.metrics.registry.getSingleMetricAsString('nova_charged_as_reserved_total');
    expect(charged).toMatch(/nova_charged_as_reserved_total\{gen_ai_request_model="trickle-1",reason="client_closed"\} 1/);
    const active = await test.ctx.metrics.registry.getSingleMetricAsString('nova_chat_streams_active');
    expect(active).toMatch(/nova_chat_streams_active 0/);
  });

  it('a client that gives up on a non-streaming request cancels the upstream request and is charged its reservation', async () => {
    const controller = new AbortController();
    const pending = postChat(base, project, 'req-abort-json', { model: 'hangs-1', messages: [{ role: 'user', content: 'x' }] }, controller.signal).catch((error: unknown) => error);
    await upstream.waitFor(() => upstream.requestsOf('hangs').length === 1);
    controller.abort();
    await pending;
    await upstream.waitFor(() => upstream.requestsOf('hangs')[0]!.aborted);
    await until(() => usage.of('req-abort-json').length > 0);
    expect(usage.of('req-abort-json')).toEqual([expect.objectContaining({ promptTokens: 16, completionTokens: 4096 })]);
  });

  it('a client that leaves while queued for a target is charged nothing, and the upstream never sees it', async () => {
    const before = upstream.requestsOf('hangs').length;
    const holder = new AbortController();
    const holding = postChat(base, project, 'req-queue-holder', { model: 'queued-1', messages: [{ role: 'user', content: 'x' }] }, holder.signal).catch((e: unknown) => e);
    await upstream.waitFor(() => upstream.requestsOf('hangs').length === before + 1);
    const leaver = new AbortController();
    const leaving = postChat(base, project, 'req-queue-leaver', { model: 'queued-1', messages: [{ role: 'user', content: 'x' }] }, leaver.signal).catch((e: unknown) => e);
    const depth = async () => (await test.ctx.metrics.registry.getSingleMetricAsString('nova_model_queue_depth')).match(/queued-1"\} (\d+)/)?.[1];
    await expect.poll(depth, { timeout: 5000, interval: 20 }).toBe('1');
    const inFlight = await test.ctx.metrics.registry.getSingleMetricAsString('nova_upstream_in_flight');
    expect(inFlight).toMatch(/nova_upstream_in_flight\{gen_ai_request_model="queued-1",upstream="127\.0\.0\.1:\d+"\} 1/);
    leaver.abort();
    await leaving;
    await expect.poll(depth, { timeout: 5000, interval: 20 }).toBe('0');
    await until(() => usage.of('req-queue-leaver').length > 0);
    expect(usage.of('req-queue-leaver')).toEqual([expect.objectContaining({ promptTokens: 0, completionTokens: 0 })]);
    expect(upstream.requestsOf('hangs')).toHaveLength(before + 1);
    holder.abort();
    await holding;
  });

  it('an upstream that breaks off mid-stream ends the stream with an error event; the reservation is charged, nothing stored', async () => {
    const res = await chat(test.app, project.auth, { model: 'breaks-1', messages: [{ role: 'user', content: 'x' }], stream: true }, {
      'x-request-id': 'req-breaks',
    });
    expect(res.statusCode).toBe(200);
    const data = sseData(res.body);
    expect(JSON.parse(data.at(-1)!)).toMatchObject({ error: { type: 'upstream_error', code: 'upstream_unavailable' } });
    expect(usage.of('req-breaks')).toEqual([expect.objectContaining({ promptTokens: 16, completionTokens: 4096, storageBytesDelta: 0 })]);
    // A stream broken off after its 200 is an error answer all the same.
    expect(usage.errorsOf('req-breaks')).toEqual([expect.objectContaining({ model: 'breaks-1', errors: 1 })]);
    const conversation = await test.app.inject({ url: `/v1/conversations/${res.headers['x-conversation-id']}`, headers: project.auth });
    expect(conversation.statusCode).toBe(404);
  });
});

describe('replies that break off or stall mid-body, and a stream the client reads slowly (real sockets)', () => {
  let upstream: LoopbackUpstream;
  let test: TestApp;
  let project: TestProject;
  let usage: RecordingUsageMeter;
  let base: string;
  /** The paths of the upstream requests whose replies are over (sent whole or cut off). */
  const closed = () => upstream.requests.filter((request) => request.closed).map((request) => request.path);
  const half = '{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"par';
  // 40 MB: more than the sockets between can buffer (loopback buffers grow to several MB each).
  const FLOOD_EVENTS = 2_000;
  const floodEvent = (n: number) =>
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', model: 'flood-1', choices: [{ index: 0, delta: { content: `${n} ${'x'.repeat(20_000)}` } }] })}\n\n`;
  /** Bytes of the flood the gateway has taken off the upstream's hands so far. */
  const flooded = () => upstream.requestsOf('flood')[0]?.bytesFlushed ?? 0;

  beforeAll(async () => {
    // Headers and half a JSON body, then: the connection cut (/cut), or nothing more (/stall).
    // /flood: a stream written as fast as the gateway takes it.
    const halfReply = { headers: { 'content-length': String(half.length * 2) }, body: half };
    upstream = await LoopbackUpstream.start({
      cut: { ...halfReply, afterBody: 'cut' },
      stall: { ...halfReply, afterBody: 'stall' },
      flood: { headers: { 'content-type': 'text/event-stream' }, flood: { piece: floodEvent, count: FLOOD_EVENTS, tail: 'data: [DONE]\n\n' } },
    });
    ({ test, usage, base, project } = await listeningApp(upstream, [
      { id: 'cut-1', upstream: upstream.baseUrl('cut'), timeout_ms: 10_000 },
      { id: 'stall-1', upstream: upstream.baseUrl('stall'), timeout_ms: 10_000 },
      { id: 'flood-1', upstream: upstream.baseUrl('flood'), timeout_ms: 10_000 },
    ]));
  });
  afterAll(async () => {
    await test.close();
    await upstream.close();
  });

  it('answers 502 (upstream_error: a reply it cannot read, not an unreachable backend) when the reply is cut off after its headers, and charges the reservation', async () => {
    const response = await postChat(base, project, 'req-cut-json', { model: 'cut-1', messages: [{ role: 'user', content: 'x' }] });
    expect(response.status).toBe(502);
    expect(((await response.json()) as { error: { type: string; code: string } }).error).toMatchObject({ type: 'upstream_error', code: 'upstream_error' });
    await until(() => usage.of('req-cut-json').length > 0);
    expect(usage.of('req-cut-json')).toEqual([expect.objectContaining({ promptTokens: 16, completionTokens: 4096 })]);
  });

  it('a client that gives up while the reply is arriving cancels the upstream request and is charged its reservation', async () => {
    const controller = new AbortController();
    const pending = postChat(base, project, 'req-stall-json', { model: 'stall-1', messages: [{ role: 'user', content: 'x' }] }, controller.signal).catch((error: unknown) => error);
    await until(() => test.ctx.lifecycle.inFlight > 0);
    await sleep(50);
    expect(closed().filter((url) => url.startsWith('/stall'))).toEqual([]);
    controller.abort();
    await pending;
    await until(() => closed().some((url) => url.startsWith('/stall')));
    await until(() => usage.of('req-stall-json').length > 0);
    expect(usage.of('req-stall-json')).toEqual([expect.objectContaining({ promptTokens: 16, completionTokens: 4096 })]);
  });

  it('passes a client that reads slowly the upstream\'s pace: the upstream waits, nothing piles up, every event arrives in order', async () => {
    const url = new URL(`${base}/v1/chat/completions`);
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const outgoing = httpRequest(url, { method: 'POST', headers: { ...project.auth, 'content-type': 'application/json' } }, resolve);
      outgoing.on('error', reject);
      outgoing.end(JSON.stringify({ model: 'flood-1', messages: [{ role: 'user', content: 'x' }], stream: true }));
    });
    expect(response.statusCode).toBe(200);
    response.pause();
    // The events' numbers as they arrive, read from each event's start (an event is 20 KB).
    const numbers: number[] = [];
    let rest = '';
    let done = false;
    try {
      // The client reads nothing: the upstream gets as far as the sockets' buffers between take
      // (several MB on loopback), then waits: its count stops moving, short of the whole flood.
      const total = Array.from({ length: FLOOD_EVENTS }, (_, n) => floodEvent(n).length).reduce((a, b) => a + b, 0);
      let seen = -1;
      let still = 0;
      await until(() => {
        still = flooded() === seen ? still + 1 : 0;
        seen = flooded();
        return still >= 30 || flooded() === total;
      }, 20_000);
      expect(flooded()).toBeLessThan(total);
      response.setEncoding('utf8');
      response.on('data', (part: string) => {
        const events = (rest + part).split('\n\n');
        rest = events.pop()!;
        for (const event of events) {
          if (event === 'data: [DONE]') done = true;
          else numbers.push(Number(/"content":"(\d+) /.exec(event.slice(0, 200))?.[1]));
        }
      });
      response.resume();
      await new Promise((resolve) => response.once('end', resolve));
    } finally {
      response.destroy();
    }
    expect(numbers).toHaveLength(FLOOD_EVENTS);
    expect(numbers.every((n, index) => n === index)).toBe(true);
    expect(done && rest === '').toBe(true);
  });
});

describe('closing the app (real sockets)', () => {
  it('ends an upstream call still in flight and the client connection waiting on it, instead of waiting for them', async () => {
    const upstream = await LoopbackUpstream.start({ hangs: { hang: true } });
    const { test, base, project } = await listeningApp(upstream, [{ id: 'hangs-1', upstream: upstream.baseUrl('hangs'), timeout_ms: 60_000 }]);
    try {
      const pending = postChat(base, project, 'req-at-close', { model: 'hangs-1', messages: [{ role: 'user', content: 'x' }] }).catch((error: unknown) => error);
      await upstream.waitFor(() => upstream.requestsOf('hangs').length === 1);
      let closed = false;
      const closing = test.close().then(() => (closed = true));
      // The upstream sees its request ended, and the app finishes closing well before the 60 s call timeout.
      await upstream.waitFor(() => upstream.requestsOf('hangs')[0]!.aborted);
      await until(() => closed, 10_000);
      await closing;
      expect(await pending).toBeInstanceOf(Error);
    } finally {
      await upstream.close();
    }
  });
});
