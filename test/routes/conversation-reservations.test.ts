import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { chatConfig, chatEnv } from '../support/chat-fixtures.js';
import { buildTestApp, createProject, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

const REPLY = 'r'.repeat(600);
/** Far above every bound the tests set per project (setMaxBytes). */
const DEFAULT_BOUND = 10_000_000;

/**
 * A chat backend that holds every request until the test opens it, then answers each as `mode`
 * says: a JSON completion, a 500, or an event stream cut after its first chunk.
 */
class GatedUpstream {
  arrivals = 0;
  mode: 'reply' | 'fail' | 'cut' = 'reply';
  /** Told of every arrival. */
  onArrival: () => void = () => undefined;
  private open = false;
  private readonly waiting: ServerResponse[] = [];
  private readonly listeners = new Set<() => void>();

  private constructor(private readonly server: Server) {}

  static async start(): Promise<GatedUpstream> {
    const server = createServer();
    const upstream = new GatedUpstream(server);
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      request.resume();
      request.once('end', () => upstream.arrive(response));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return upstream;
  }

  baseUrl(scenario = 'default'): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/${scenario}/v1`;
  }

  /** Resolves once `count` requests have arrived. */
  arrived(count: number): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (this.arrivals < count) return;
        this.listeners.delete(check);
        resolve();
      };
      this.listeners.add(check);
      check();
    });
  }

  /** Answers what waits, and what comes later at once, by `mode`. */
  release(mode: GatedUpstream['mode']): void {
    this.mode = mode;
    this.open = true;
    for (const response of this.waiting.splice(0)) this.answer(response);
  }

  hold(): void {
    this.open = false;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private arrive(response: ServerResponse): void {
    this.arrivals += 1;
    if (this.open) this.answer(response);
    else this.waiting.push(response);
    for (const listener of [...this.listeners]) listener();
    this.onArrival();
  }

  private answer(response: ServerResponse): void {
    if (this.mode === 'fail') {
      response.writeHead(500, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: 'backend failed', type: 'server_error', code: null } }));
      return;
    }
    if (this.mode === 'cut') {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = { id: 'chatcmpl-cut', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'par' } }] };
      response.write(`data: ${JSON.stringify(chunk)}\n\n`, () => response.socket?.destroy());
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(
      JSON.stringify({
        id: 'chatcmpl-gated',
        object: 'chat.completion',
        created: 1,
        model: 'm',
        choices: [{ index: 0, message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      }),
    );
  }
}

/** A store: true chat body of the same byte length for every `n` below 1000. */
const storedChat = (n: number, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: 'fake-1', messages: [{ role: 'user', content: `${String(n).padStart(3, '0')} ${'x'.repeat(300)}` }], store: true, ...extra });

/** The stored size of a message (chat-conversation.ts storeExchange): its fields, then an id and a time, both of fixed length. */
const recordBytes = (message: Record<string, unknown>) =>
  Buffer.byteLength(JSON.stringify({ ...message, id: `msg_${'0'.repeat(22)}`, created_at: new Date(0).toISOString() }));

async function until(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}

/**
 * conversations.max_bytes_per_project is reserved atomically, by the bytes read, before the call
 * (chat-conversation.ts reserveRoom): concurrent requests cannot all pass one check, a chunked body
 * counts, and a call that stores nothing gives its room back.
 */
describe.each(STORE_KINDS)('stored-conversation bound reservations (%s store)', (kind) => {
  let upstream: GatedUpstream;
  let test: TestApp;
  let base: string;
  const B = Buffer.byteLength(storedChat(0));

  beforeAll(async () => {
    upstream = await GatedUpstream.start();
    const config = chatConfig(upstream);
    // The gate holds calls open while the test looks: no upstream timeout during it.
    const models = config.models.map((model) => (model.id === 'fake-1' ? { ...model, timeout_ms: 60_000 } : model));
    test = await buildTestApp(kind, {
      config: { ...config, models, conversations: { ...config.conversations, max_bytes_per_project: DEFAULT_BOUND } },
      deps: { env: chatEnv },
    });
    base = await test.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await test.close();
    await upstream.close();
  });

  const post = (project: TestProject, body: string) =>
    test.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...project.auth, 'content-type': 'application/json' }, payload: body });
  const held = async (project: TestProject) => (await test.store.conversations.held(project.projectId, DEFAULT_BOUND)).bytes;
  /** A conversation the gateway wrote: the write leaves with the response, and may land just after it (conversations.ts sendAppend). */
  const storedBytesOf = async (project: TestProject, id: string) => {
    await until(async () => (await test.store.conversations.get(project.projectId, id)) !== null);
    return (await test.store.conversations.get(project.projectId, id))!.bytes;
  };
  const boundedProject = async (bound: number) => {
    const project = await createProject(test.app);
    expect(await test.store.conversations.setMaxBytes(project.projectId, bound)).toBe(true);
    return project;
  };

  it('admits exactly the bodies that fit among 40 concurrent store: true chats; what is held ends at bound + the replies admitted', async () => {
    const bound = 5 * B + Math.floor(B / 2);
    const project = await boundedProject(bound);
    upstream.hold();
    const arrivalsBefore = upstream.arrivals;
    let refused = 0;
    // The gate opens once every request is either at the upstream or refused: all 40 have passed the check.
    let opened: () => void = () => undefined;
    const allDecided = new Promise<void>((resolve) => (opened = resolve));
    const decided = () => {
      if (upstream.arrivals - arrivalsBefore + refused === 40) opened();
    };
    upstream.onArrival = decided;
    const answers = Array.from({ length: 40 }, (_, n) =>
      post(project, storedChat(n)).then((res) => {
        if (res.statusCode === 429) refused += 1;
        decided();
        return res;
      }),
    );
    await allDecided;
    const admitted = upstream.arrivals - arrivalsBefore;
    expect(admitted).toBe(5);
    // In flight: the five bodies' bytes, no more than the bound.
    expect(await held(project)).toBe(5 * B);
    upstream.release('reply');
    const responses = await Promise.all(answers);
    upstream.onArrival = () => undefined;

    const ok = responses.filter((res) => res.statusCode === 200);
    expect(ok).toHaveLength(5);
    for (const res of responses.filter((r) => r.statusCode !== 200)) {
      expect(errorOf(res)).toMatchObject({ status: 429, code: 'storage_quota_exceeded' });
    }
    // Stored: each exchange's real size, its reply included, even past the bound.
    const userBytes = recordBytes(JSON.parse(storedChat(0)).messages[0]);
    const replyBytes = recordBytes({ role: 'assistant', content: REPLY });
    let stored = 0;
    for (const res of ok) stored += await storedBytesOf(project, res.json().conversation_id as string);
    expect(stored).toBe(5 * (userBytes + replyBytes));
    expect(await held(project)).toBe(stored);
    expect(stored).toBeGreaterThan(bound);
    expect(stored).toBeLessThanOrEqual(bound + 5 * replyBytes);
    // The next one is refused before the upstream is called.
    const next = await post(project, storedChat(41));
    expect(errorOf(next)).toMatchObject({ status: 429, code: 'storage_quota_exceeded' });
    expect(upstream.arrivals - arrivalsBefore).toBe(5);
  });

  it('counts a chunked body (no Content-Length) by the bytes read', async () => {
    const sendChunked = (project: TestProject, body: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest(`${base}/v1/chat/completions`, { method: 'POST', headers: { ...project.auth, 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode!, body: text }));
        });
        req.on('error', reject);
        const half = Math.floor(body.length / 2);
        req.write(body.slice(0, half));
        req.end(body.slice(half));
      });

    upstream.release('reply');
    const tight = await boundedProject(B - 1);
    const refused = await sendChunked(tight, storedChat(1));
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body).error.code).toBe('storage_quota_exceeded');
    expect(await held(tight)).toBe(0);

    upstream.hold();
    const exact = await boundedProject(B);
    const arrivalsBefore = upstream.arrivals;
    const answer = sendChunked(exact, storedChat(2));
    await upstream.arrived(arrivalsBefore + 1);
    expect(await held(exact)).toBe(B);
    upstream.release('reply');
    const served = await answer;
    expect(served.status).toBe(200);
    const id = JSON.parse(served.body).conversation_id as string;
    expect(await storedBytesOf(exact, id)).toBe(recordBytes(JSON.parse(storedChat(2)).messages[0]) + recordBytes({ role: 'assistant', content: REPLY }));
    const storedSize = await storedBytesOf(exact, id);
    expect(await held(exact)).toBe(storedSize);
  });

  it('gives the reservation back when the call fails: the room was held during it, and is free after it', async () => {
    const project = await boundedProject(B);
    upstream.hold();
    const arrivalsBefore = upstream.arrivals;
    const first = post(project, storedChat(1));
    await upstream.arrived(arrivalsBefore + 1);
    expect(await held(project)).toBe(B);
    // A second one while the first holds the room: refused, never sent upstream.
    const second = post(project, storedChat(2));
    const outcome = await Promise.race([second.then(() => 'answered'), upstream.arrived(arrivalsBefore + 2).then(() => 'sent upstream')]);
    expect(outcome).toBe('answered');
    expect(errorOf(await second)).toMatchObject({ status: 429, code: 'storage_quota_exceeded' });

    upstream.release('fail');
    expect((await first).statusCode).toBeGreaterThanOrEqual(500);
    await until(async () => (await held(project)) === 0);
    upstream.release('reply');
    const third = await post(project, storedChat(3));
    expect(third.statusCode).toBe(200);
    const thirdBytes = await storedBytesOf(project, third.json().conversation_id as string);
    expect(await held(project)).toBe(thirdBytes);
  });

  it('gives the reservation back when the client leaves mid-call and when the stream is cut', async () => {
    const project = await boundedProject(B);
    upstream.hold();
    let arrivalsBefore = upstream.arrivals;
    const controller = new AbortController();
    const left = fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...project.auth, 'content-type': 'application/json' },
      body: storedChat(1),
      signal: controller.signal,
    }).catch(() => 'aborted');
    await upstream.arrived(arrivalsBefore + 1);
    expect(await held(project)).toBe(B);
    controller.abort();
    expect(await left).toBe('aborted');
    await until(async () => (await held(project)) === 0);

    const streamed = storedChat(2, { stream: true });
    const streaming = await boundedProject(Buffer.byteLength(streamed));
    upstream.hold();
    arrivalsBefore = upstream.arrivals;
    const cut = post(streaming, streamed);
    await upstream.arrived(arrivalsBefore + 1);
    expect(await held(streaming)).toBe(Buffer.byteLength(streamed));
    upstream.release('cut');
    expect((await cut).statusCode).toBe(200);
    await until(async () => (await held(streaming)) === 0);
    upstream.release('reply');
  });
});
