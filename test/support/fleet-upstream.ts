import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseJson, readBody } from './loopback-server.js';

/**
 * One replica of a model fleet (DESIGN.md section 10): an OpenAI-compatible backend on its own
 * loopback port, so that its origin is its own (a fleet's health probe is a path on the target's
 * origin). Unlike the scenario servers of loopback-server.ts, whose listener is fixed for their
 * life, it can stop listening and listen again on the same port: a replica that refuses
 * connections and comes back.
 *
 * - `POST /v1/chat/completions` answers after `serviceMs` with a chat completion (JSON; usage
 *   reported). It counts the requests in flight (from the request read until its response is over)
 *   and keeps the most seen, and records every request with its marker: the text of the last
 *   message, which tests make unique per request.
 * - `GET /health` answers 200 while serving, 503 while failing; every probe is counted.
 * - `fail()`: chat answers 500 at once (health 503); `refuse()`: the port refuses connections (the
 *   open ones are cut); `recover()`: serves again.
 */
export interface FleetRequest {
  marker: string;
  /** Times (Date.now()) the request arrived and its response ended (sent or cut). */
  receivedAt: number;
  endedAt: number | null;
  /** What it was answered: 200, or 500 while failing. */
  status: number;
  /** The connection closed before the response was sent whole (the gateway gave up on it). */
  aborted: boolean;
}

type Mode = 'serve' | 'fail' | 'refuse';

export class FleetReplica {
  readonly requests: FleetRequest[] = [];
  /** GET /health requests received. */
  healthChecks = 0;
  inFlight = 0;
  maxInFlight = 0;
  private mode: Mode = 'serve';
  private server: Server;
  private readonly sockets = new Set<Socket>();
  private listeningPort = 0;

  private constructor(
    /** Milliseconds each chat request takes (the replica's service time). */
    public serviceMs: number,
  ) {
    this.server = this.createServer();
  }

  static async start(options: { serviceMs?: number } = {}): Promise<FleetReplica> {
    const replica = new FleetReplica(options.serviceMs ?? 200);
    await replica.listen(0);
    return replica;
  }

  get port(): number {
    return this.listeningPort;
  }

  /** The replica's base URL, as a fleet target's `upstream`. */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /** Markers of the chat requests received, in arrival order. */
  get markers(): string[] {
    return this.requests.map((request) => request.marker);
  }

  /** Chat requests received (of any outcome). */
  get received(): number {
    return this.requests.length;
  }

  /** Chat requests received whose marker starts with `prefix`. */
  receivedWith(prefix: string): number {
    return this.requests.filter((request) => request.marker.startsWith(prefix)).length;
  }

  /** Forgets the record and the most in flight seen (the current in-flight count stays). */
  reset(): void {
    this.requests.length = 0;
    this.healthChecks = 0;
    this.maxInFlight = this.inFlight;
  }

  /** Chat answers 500 at once and health 503, until `recover()`. */
  fail(): void {
    this.mode = 'fail';
  }

  /** Stops listening and cuts the open connections: connections are refused until `recover()`. */
  async refuse(): Promise<void> {
    if (this.mode === 'refuse') return;
    this.mode = 'refuse';
    await this.closeListener();
  }

  /** Serves again (listening again on the same port after `refuse()`). */
  async recover(): Promise<void> {
    const was = this.mode;
    this.mode = 'serve';
    if (was === 'refuse') {
      this.server = this.createServer();
      await this.listen(this.listeningPort);
    }
  }

  async close(): Promise<void> {
    if (this.mode !== 'refuse') await this.closeListener();
    this.mode = 'refuse';
  }

  /** Resolves when `predicate` holds (checked every 10 ms), else fails after `timeoutMs`. */
  async waitFor(predicate: (replica: this) => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this)) {
      if (Date.now() > deadline) throw new Error(`fleet replica ${this.port}: ${what} not met in ${timeoutMs} ms`);
      await sleep(10);
    }
  }

  private createServer(): Server {
    const server = createServer((request, response) => void this.handle(request, response));
    server.keepAliveTimeout = 60_000;
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    return server;
  }

  private async listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.listeningPort = (this.server.address() as AddressInfo).port;
  }

  private async closeListener(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method === 'GET' && path === '/health') {
      this.healthChecks++;
      const up = this.mode === 'serve';
      response.writeHead(up ? 200 : 503, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ status: up ? 'ok' : 'failing' }));
      return;
    }
    if (request.method !== 'POST' || path !== '/v1/chat/completions') {
      response.writeHead(404, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: `no route ${request.method} ${path}`, type: 'invalid_request_error', code: null } }));
      return;
    }
    const body = parseJson((await readBody(request)).toString('utf8'));
    const recorded: FleetRequest = { marker: markerOf(body), receivedAt: Date.now(), endedAt: null, status: 200, aborted: false };
    const sequence = this.requests.push(recorded);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    response.once('close', () => {
      this.inFlight--;
      recorded.endedAt = Date.now();
      if (!response.writableFinished) recorded.aborted = true;
    });
    if (this.mode !== 'serve') {
      recorded.status = 500;
      response.writeHead(500, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: 'fleet replica failing', type: 'server_error', code: null } }));
      return;
    }
    await sleep(this.serviceMs);
    if (response.destroyed) return;
    const content = `served by ${this.port}`;
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(
      JSON.stringify({
        id: `chatcmpl-fleet${this.port}x${sequence}`,
        object: 'chat.completion',
        created: 1_700_000_000,
        model: String(body.model),
        choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
      }),
    );
  }
}

/** The text of a chat body's last message (a string, or the text parts of an array). */
function markerOf(body: Record<string, unknown>): string {
  const last = (body.messages as Array<{ content?: unknown }> | undefined)?.at(-1);
  const content = last?.content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part: unknown) => (part !== null && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string' ? (part as { text: string }).text : ''))
      .join('');
  }
  return '';
}

/** Starts `count` replicas with the same service time. */
export function startReplicas(count: number, serviceMs: number): Promise<FleetReplica[]> {
  return Promise.all(Array.from({ length: count }, () => FleetReplica.start({ serviceMs })));
}
