import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** How the fake answers one scenario (the first path segment: /<scenario>/v1/chat/completions). */
export interface FakeBehavior {
  /** HTTP status; non-2xx answers carry `errorBody` (default an OpenAI-style error). */
  status?: number;
  errorBody?: unknown;
  headers?: Record<string, string>;
  /** Wait before the response headers. */
  latencyMs?: number;
  /** The reply, one piece a stream chunk (and a completion token). */
  chunks?: string[];
  /** Wait between stream chunks. */
  chunkDelayMs?: number;
  /** Never answer (keeps the connection open). */
  hang?: boolean;
  /** Streams: after this many content chunks, destroy the socket. */
  closeAfterChunks?: number;
  /** Streams: after this many content chunks, stop sending but keep the connection open. */
  hangAfterChunks?: number;
  /** Report usage (non-streaming always unless false; streams when include_usage is asked). */
  usage?: boolean;
  promptTokens?: number;
}

export interface RecordedRequest {
  scenario: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
  /** The client side closed the connection before the response was complete. */
  aborted: boolean;
  completed: boolean;
  /** Content chunks written before the end or the abort. */
  chunksSent: number;
}

const DEFAULT: FakeBehavior = { chunks: ['Hello', ' from', ' the', ' fake', ' upstream.'] };

/** An OpenAI-compatible backend on a loopback port, scripted per scenario, recording every request. */
export class FakeUpstream {
  readonly requests: RecordedRequest[] = [];
  private readonly behaviors = new Map<string, FakeBehavior>();
  private readonly sockets = new Set<Socket>();
  private readonly waiters: Array<() => void> = [];
  /** When false, requests are not recorded (load tests). */
  record = true;

  private constructor(private readonly server: Server) {}

  static async start(behaviors: Record<string, FakeBehavior> = {}, port = 0): Promise<FakeUpstream> {
    const server = createServer();
    const fake = new FakeUpstream(server);
    server.on('request', (request: IncomingMessage, response: ServerResponse) => void fake.handle(request, response));
    server.keepAliveTimeout = 60_000;
    server.on('connection', (socket) => {
      fake.sockets.add(socket);
      socket.once('close', () => fake.sockets.delete(socket));
    });
    for (const [name, behavior] of Object.entries(behaviors)) fake.set(name, behavior);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    return fake;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The OpenAI base URL of a scenario, as a model's `upstream`. */
  baseUrl(scenario = 'default'): string {
    return `http://127.0.0.1:${this.port}/${scenario}/v1`;
  }

  set(scenario: string, behavior: FakeBehavior): void {
    this.behaviors.set(scenario, behavior);
  }

  requestsOf(scenario: string): RecordedRequest[] {
    return this.requests.filter((request) => request.scenario === scenario);
  }

  /** Resolves when a recorded request satisfies `predicate` (checked on every change). */
  async waitFor(predicate: (requests: RecordedRequest[]) => boolean, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.requests)) {
      if (Date.now() > deadline) throw new Error('fake upstream: condition not met in time');
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 20);
      });
    }
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private changed(): void {
    this.waiters.splice(0).forEach((resolve) => resolve());
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const segments = (request.url ?? '/').split('?')[0]!.split('/').filter(Boolean);
    const scenario = segments[0] === 'v1' ? 'default' : (segments[0] ?? 'default');
    const behavior = { ...DEFAULT, ...(this.behaviors.get(scenario) ?? {}) };
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
    } catch {
      // recorded as {}
    }
    const recorded: RecordedRequest = {
      scenario,
      path: request.url ?? '/',
      headers: request.headers,
      body,
      aborted: false,
      completed: false,
      chunksSent: 0,
    };
    if (this.record) this.requests.push(recorded);
    response.once('close', () => {
      if (!response.writableFinished) recorded.aborted = true;
      this.changed();
    });
    this.changed();

    if (behavior.hang) return;
    if (behavior.latencyMs) await sleep(behavior.latencyMs);
    if (response.destroyed) return;
    const status = behavior.status ?? 200;
    if (status < 200 || status >= 300) {
      const error = behavior.errorBody ?? { error: { message: `fake upstream says ${status}`, type: 'fake_error', code: null } };
      response.writeHead(status, { 'content-type': 'application/json', ...behavior.headers });
      response.end(JSON.stringify(error));
      recorded.completed = true;
      return;
    }
    if (body.stream === true) await this.stream(body, behavior, response, recorded);
    else this.json(body, behavior, response, recorded);
  }

  private json(body: Record<string, unknown>, behavior: FakeBehavior, response: ServerResponse, recorded: RecordedRequest): void {
    const pieces = behavior.chunks ?? [];
    const completion = {
      id: 'chatcmpl-fake123',
      object: 'chat.completion',
      created: 1_700_000_000,
      model: body.model,
      choices: [{ index: 0, message: { role: 'assistant', content: pieces.join('') }, finish_reason: 'stop' }],
      ...(behavior.usage === false ? {} : { usage: this.usageOf(behavior) }),
    };
    response.writeHead(200, { 'content-type': 'application/json', ...behavior.headers });
    response.end(JSON.stringify(completion));
    recorded.chunksSent = pieces.length;
    recorded.completed = true;
  }

  private usageOf(behavior: FakeBehavior) {
    const completion = behavior.chunks?.length ?? 0;
    const prompt = behavior.promptTokens ?? 7;
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  }

  private async stream(body: Record<string, unknown>, behavior: FakeBehavior, response: ServerResponse, recorded: RecordedRequest): Promise<void> {
    const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true && behavior.usage !== false;
    const head = `{"id":"chatcmpl-fake123","object":"chat.completion.chunk","created":1700000000,"model":${JSON.stringify(body.model)},"choices":`;
    const tail = includeUsage ? ',"usage":null}' : '}';
    const write = (choices: string) => response.write(`data: ${head}${choices}${tail}\n\n`);
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...behavior.headers });
    write('[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]');
    for (const piece of behavior.chunks ?? []) {
      if (behavior.chunkDelayMs) await sleep(behavior.chunkDelayMs);
      if (response.destroyed) return;
      if (behavior.closeAfterChunks !== undefined && recorded.chunksSent >= behavior.closeAfterChunks) {
        response.socket?.destroy();
        return;
      }
      if (behavior.hangAfterChunks !== undefined && recorded.chunksSent >= behavior.hangAfterChunks) return;
      write(`[{"index":0,"delta":{"content":${JSON.stringify(piece)}},"finish_reason":null}]`);
      recorded.chunksSent++;
      this.changed();
    }
    write('[{"index":0,"delta":{},"finish_reason":"stop"}]');
    if (includeUsage) response.write(`data: ${head}[],"usage":${JSON.stringify(this.usageOf(behavior))}}\n\n`);
    response.end('data: [DONE]\n\n');
    recorded.completed = true;
  }
}
