import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * What the tests' fake backends share (loopback-upstream.ts, messages-upstream.ts,
 * vllm-like-upstream.ts): a node:http server on 127.0.0.1 and a free port, whose first path segment
 * names a scenario (`/<scenario>/v1`) with its behaviour, which records every request and closes
 * with its connections cut. Each backend only says how it answers (`handle`).
 */

type Json = Record<string, unknown>;

/** What every recorded request carries, for the server to keep up to date. */
export interface LoopbackRecord {
  scenario: string;
  /** The route below `/v1`, without the query. */
  route: string;
  /** The client side closed the connection before the response was complete. */
  aborted: boolean;
  /** The response is over: sent whole, or its connection closed. */
  closed: boolean;
}

/** A request target read as the fake backends route it: `/<scenario>/v1/<route>?<query>`, or `/v1/<route>` for scenario `default`. */
export function readTarget(request: IncomingMessage): { path: string; scenario: string; route: string; query: Record<string, string> } {
  const path = request.url ?? '/';
  const [pathname, search = ''] = path.split('?') as [string, string?];
  const segments = pathname.split('/').filter(Boolean);
  return {
    path,
    scenario: segments[0] === 'v1' ? 'default' : (segments[0] ?? 'default'),
    route: `/${segments.slice(segments.indexOf('v1') + 1).join('/')}`,
    query: Object.fromEntries(new URLSearchParams(search)),
  };
}

export async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A JSON object body parsed; {} for none, another type or one that does not parse. */
export function parseJson(raw: string): Json {
  try {
    const parsed: unknown = JSON.parse(raw || '{}');
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Json) : {};
  } catch {
    return {};
  }
}

export abstract class LoopbackServer<Behavior extends object, Recorded extends LoopbackRecord> {
  readonly requests: Recorded[] = [];
  protected readonly behaviors = new Map<string, Behavior>();
  private readonly sockets = new Set<Socket>();
  private readonly waiters: Array<() => void> = [];
  private readonly server = createServer();

  protected constructor() {
    this.server.on('request', (request: IncomingMessage, response: ServerResponse) => void this.handle(request, response));
    this.server.keepAliveTimeout = 60_000;
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The base URL of a scenario, as a model's `upstream`. */
  baseUrl(scenario = 'default'): string {
    return `http://127.0.0.1:${this.port}/${scenario}/v1`;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Answers one request (the server does not wait on it). */
  protected abstract handle(request: IncomingMessage, response: ServerResponse): Promise<void>;

  /** Takes the scenarios' behaviours and listens on a free loopback port: what each backend's `start` does. */
  protected async listen(behaviors: Record<string, Behavior>): Promise<this> {
    for (const [name, behavior] of Object.entries(behaviors)) this.behaviors.set(name, behavior);
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  /** Records a request, and marks it closed (aborted, if it was not sent whole) when its response closes. */
  protected record(recorded: Recorded, response: ServerResponse): void {
    this.requests.push(recorded);
    response.once('close', () => {
      if (!response.writableFinished) recorded.aborted = true;
      recorded.closed = true;
      this.changed();
    });
    this.changed();
  }

  /** Wakes those waiting on the record (a request came or closed, a chunk went out). */
  protected changed(): void {
    this.waiters.splice(0).forEach((resolve) => resolve());
  }

  /** Resolves on the next change to the record, or after 20 ms at the latest. */
  protected nextChange(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.waiters.push(resolve);
      setTimeout(resolve, 20);
    });
  }
}

/** A loopback server whose tests set and change the scenarios' behaviours and wait on its record. */
export abstract class ScenarioLoopbackServer<Behavior extends object, Recorded extends LoopbackRecord> extends LoopbackServer<Behavior, Recorded> {
  /** @param name How its errors name it (`loopback upstream`). */
  protected constructor(private readonly name: string) {
    super();
  }

  set(scenario: string, behavior: Behavior): void {
    this.behaviors.set(scenario, behavior);
  }

  /** Changes some of a scenario's behaviour, keeping the rest. */
  update(scenario: string, changes: Behavior): void {
    this.behaviors.set(scenario, { ...this.behaviors.get(scenario), ...changes });
  }

  requestsOf(scenario: string): Recorded[] {
    return this.requests.filter((request) => request.scenario === scenario);
  }

  /** The requests to a route below `/v1`, of any scenario. */
  requestsTo(route: string): Recorded[] {
    return this.requests.filter((request) => request.route === route);
  }

  /** Resolves when the recorded requests satisfy `predicate` (checked on every change). */
  async waitFor(predicate: (requests: Recorded[]) => boolean, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.requests)) {
      if (Date.now() > deadline) throw new Error(`${this.name}: condition not met in time`);
      await this.nextChange();
    }
  }
}
