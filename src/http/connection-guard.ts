import { readdir } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** Why a connection was refused at accept (`per_address`, `total`, `fd`) or cut (`pipelining`, `slow_body`). */
export type ConnectionRefusal = 'per_address' | 'total' | 'fd' | 'pipelining' | 'slow_body';

/** What the guard reports; src/metrics/connection-metrics.ts counts it. */
export interface ConnectionEvents {
  refused(reason: ConnectionRefusal): void;
  /** Connections open now (sampled when metrics are collected). */
  follow(openConnections: () => number): void;
}

/** The part of the app's logger the guard writes to. */
export interface PressureLog {
  warn(fields: object, message: string): void;
  info(fields: object, message: string): void;
}

export interface ConnectionBounds {
  /** Open connections one client address may hold; 0: no cap. */
  maxPerAddress: number;
  /** Open connections in total; undefined: derived from the file-descriptor limit; 0: no cap. */
  maxConnections: number | undefined;
  /** Requests of one connection handled at once; the rest wait, unread, until these finish. */
  maxPipelined: number;
  /** A body must arrive at this rate after the grace period (0: no minimum). */
  bodyMinBytesPerSecond: number;
  bodyMinRateGraceMs: number;
}

/** File descriptors kept for upstream sockets, Redis, logs and files (docs/operations.md). */
const FD_RESERVE = 256;
/** Without /proc (not Linux) or with no soft limit, the total cap when none is configured. */
const FALLBACK_MAX_CONNECTIONS = 10_000;
/** A quiet period this long ends a pressure episode (the next refusal logs again). */
const EPISODE_QUIET_MS = 10_000;
/** How often the slow-body check runs, and the open descriptors are counted under pressure. */
const CHECK_INTERVAL_MS = 1000;

/** The soft "Max open files" limit of this process, from /proc/self/limits; undefined when unknown or unlimited. */
export function openFilesSoftLimit(limitsText?: string): number | undefined {
  let text = limitsText;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/limits', 'utf8');
    } catch {
      return undefined;
    }
  }
  const match = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
  if (!match || match[1] === 'unlimited') return undefined;
  return Number(match[1]);
}

/**
 * The total cap when `server.max_connections` is not set: 80% of the soft file-descriptor
 * limit, minus FD_RESERVE for upstream sockets and Redis (docs/operations.md), at least 64.
 */
export function defaultMaxConnections(softLimit: number | undefined): number {
  if (softLimit === undefined) return FALLBACK_MAX_CONNECTIONS;
  return Math.max(64, Math.floor(softLimit * 0.8) - FD_RESERVE);
}

/** Descriptors that must stay free: below this many, new connections are refused (reason `fd`). */
export function fdHeadroom(softLimit: number): number {
  return Math.max(64, Math.floor(softLimit * 0.05));
}

/**
 * Stops reading a socket: Node's HTTP server stops the read on the socket's 'pause' event, which
 * pause() emits only when the stream was flowing. Node resumes after every parsed request (and
 * a resume it scheduled may run after a pause), so a stream already paused gets the event directly.
 */
function stopReading(socket: Socket): void {
  if (socket.readableFlowing === false) socket.emit('pause');
  else socket.pause();
}

interface ConnectionState {
  /** Requests handed to the app whose responses have not finished. */
  inFlight: number;
  /** Requests Node parsed that wait for one of those to finish, in order. */
  waiting: Array<[IncomingMessage, ServerResponse]>;
  /** Reading stopped by this guard (not by Node's own back-pressure). */
  held: boolean;
  /** Held because of pipelining (not a new connection waiting for its first read). */
  pipelineHeld: boolean;
  /** Counted once per connection in the `pipelining` refusals. */
  everHeld: boolean;
  dispatchScheduled: boolean;
}

interface BodyWatch {
  request: IncomingMessage;
  socket: Socket;
  startedAt: number;
  bytesAtStart: number;
}

/**
 * Bounds on what connections hold before anything is authenticated (DESIGN.md section 7,
 * "Bounded before authenticated"): connections per address and in total, file descriptors,
 * pipelined requests per connection, and the minimum data rate of a body. Refusals are
 * counted, and logged once per episode.
 */
export class ConnectionGuard {
  readonly maxConnections: number;
  private readonly softLimit: number | undefined;
  private open = 0;
  private readonly perAddress = new Map<string, number>();
  private readonly states = new WeakMap<Socket, ConnectionState>();
  private readonly bodies = new Set<BodyWatch>();
  private readonly episodes = new Map<ConnectionRefusal, { since: number; last: number; refused: number }>();
  private timer: NodeJS.Timeout | undefined;
  private server: Server | undefined;
  /** Held connections whose waiting requests were all handed on, to be read again in turn. */
  private readonly resuming: Array<[ConnectionState, Socket]> = [];
  /** New connections, not read yet. */
  private readonly resumingNew: Array<[ConnectionState, Socket]> = [];
  private resumeScheduled = false;
  /** Connections held because of pipelining. */
  private holding = 0;
  private newTurn = false;
  /** Descriptors counted in /proc/self/fd, and the open connections at that count. */
  private fdSample: { count: number; open: number } | undefined;
  private fdCounting = false;

  constructor(
    private readonly bounds: ConnectionBounds,
    private readonly events?: ConnectionEvents,
    private readonly log?: PressureLog,
    softLimit: number | undefined = openFilesSoftLimit(),
  ) {
    this.softLimit = softLimit;
    this.maxConnections = bounds.maxConnections ?? defaultMaxConnections(softLimit);
    events?.follow(() => this.open);
  }

  install(server: Server): void {
    this.server = server;
    server.on('connection', (socket: Socket) => this.admit(socket));
    server.on('close', () => this.stopTimer());
  }

  /** The request handler, wrapped so that each connection has at most `maxPipelined` requests in the app. */
  wrap(handler: Handler): Handler {
    return (request, response) => {
      const socket = request.socket;
      const state = this.states.get(socket);
      this.watchBody(request, socket);
      if (state === undefined) return handler(request, response);
      if (state.inFlight < this.bounds.maxPipelined && state.waiting.length === 0) {
        this.dispatch(state, handler, request, response);
        return;
      }
      // Node parses every request of a read (a 64 KB read can hold 1,500) before it can be paused:
      // those wait here, unhandled, and the connection is not read until they have been answered.
      state.waiting.push([request, response]);
      if (!state.held) {
        state.held = true;
        state.pipelineHeld = true;
        this.holding += 1;
        stopReading(socket);
        if (!state.everHeld) {
          state.everHeld = true;
          this.refused('pipelining', socket);
        }
      }
    };
  }

  private dispatch(state: ConnectionState, handler: Handler, request: IncomingMessage, response: ServerResponse): void {
    state.inFlight += 1;
    response.once('close', () => {
      state.inFlight -= 1;
      this.next(state, handler, request.socket);
    });
    handler(request, response);
  }

  /** Hands the next waiting request to the app, one event-loop turn later so that other sockets are read in between. */
  private next(state: ConnectionState, handler: Handler, socket: Socket): void {
    if (state.dispatchScheduled) return;
    state.dispatchScheduled = true;
    setImmediate(() => {
      state.dispatchScheduled = false;
      if (socket.destroyed) {
        state.waiting.length = 0;
        return;
      }
      while (state.inFlight < this.bounds.maxPipelined && state.waiting.length > 0) {
        const [request, response] = state.waiting.shift()!;
        this.dispatch(state, handler, request, response);
      }
      if (state.waiting.length === 0 && state.held) this.resumeLater(state, socket);
    });
  }

  /**
   * Each read can bring another 1,500 requests, parsed at once: new and held connections start
   * reading one per event-loop turn, so that such reads do not pile up in one turn. New ones
   * alternate with held ones, so that a client connecting now does not wait behind every flood.
   */
  private resumeLater(state: ConnectionState, socket: Socket, fresh = false): void {
    (fresh ? this.resumingNew : this.resuming).push([state, socket]);
    if (!this.resumeScheduled) {
      this.resumeScheduled = true;
      setImmediate(() => this.resumeOne());
    }
  }

  private resumeOne(): void {
    this.newTurn = !this.newTurn;
    const first = this.newTurn ? this.resumingNew : this.resuming;
    const entry = first.shift() ?? (this.newTurn ? this.resuming : this.resumingNew).shift();
    if (entry !== undefined) {
      const [state, socket] = entry;
      if (state.waiting.length === 0 && !socket.destroyed) {
        state.held = false;
        this.release(state);
        socket.resume();
      }
    }
    this.resumeScheduled = this.resuming.length > 0 || this.resumingNew.length > 0;
    if (this.resumeScheduled) setImmediate(() => this.resumeOne());
  }

  private release(state: ConnectionState): void {
    if (!state.pipelineHeld) return;
    state.pipelineHeld = false;
    this.holding -= 1;
  }

  private admit(socket: Socket): void {
    const address = socket.remoteAddress ?? '';
    const holds = this.perAddress.get(address) ?? 0;
    const reason = this.refusalFor(holds);
    if (reason !== undefined) {
      this.refused(reason, socket);
      socket.destroy();
      return;
    }
    this.open += 1;
    this.perAddress.set(address, holds + 1);
    const state: ConnectionState = { inFlight: 0, waiting: [], held: false, pipelineHeld: false, everHeld: false, dispatchScheduled: false };
    this.states.set(socket, state);
    // Node resumes a socket after each request it parses; one this guard holds stays held.
    socket.on('resume', () => {
      if (state.held) stopReading(socket);
    });
    // While connections are held, a new connection's first read (which can also hold 1,500
    // requests) waits its turn too; otherwise it is read at once.
    if (this.holding > 0) {
      state.held = true;
      stopReading(socket);
      this.resumeLater(state, socket, true);
    }
    socket.once('close', () => {
      this.open -= 1;
      state.waiting.length = 0;
      this.release(state);
      const left = (this.perAddress.get(address) ?? 1) - 1;
      if (left > 0) this.perAddress.set(address, left);
      else this.perAddress.delete(address);
    });
  }

  private refusalFor(holds: number): ConnectionRefusal | undefined {
    const { maxPerAddress } = this.bounds;
    if (maxPerAddress > 0 && holds >= maxPerAddress) return 'per_address';
    const max = this.maxConnections;
    if (max > 0) {
      if (this.open >= max) return 'total';
      // The last tenth of the total is kept for addresses holding few connections, so that a
      // handful of busy addresses cannot take every slot from everyone else.
      if (this.open >= Math.floor(max * 0.9) && holds >= Math.max(4, Math.floor(max / 100))) return 'total';
    }
    if (this.fdsNearlyOut()) return 'fd';
    return undefined;
  }

  /** Whether the descriptors in use (last count plus connections since) leave less than the headroom. */
  private fdsNearlyOut(): boolean {
    if (this.softLimit === undefined) return false;
    const headroom = fdHeadroom(this.softLimit);
    // Counting /proc/self/fd costs a directory read: only once connections alone reach half the limit.
    if (this.open < this.softLimit / 2) {
      this.fdSample = undefined;
      return false;
    }
    this.countFds();
    if (this.fdSample === undefined) return this.open + FD_RESERVE > this.softLimit - headroom;
    const inUse = this.fdSample.count + (this.open - this.fdSample.open);
    return inUse > this.softLimit - headroom;
  }

  private countFds(): void {
    if (this.fdCounting) return;
    this.fdCounting = true;
    const openAtStart = this.open;
    readdir('/proc/self/fd')
      .then((entries) => (this.fdSample = { count: entries.length, open: openAtStart }))
      .catch(() => undefined)
      .finally(() => setTimeout(() => (this.fdCounting = false), CHECK_INTERVAL_MS).unref());
  }

  private watchBody(request: IncomingMessage, socket: Socket): void {
    if (this.bounds.bodyMinBytesPerSecond <= 0 || request.complete) return;
    const length = request.headers['content-length'];
    if (request.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return;
    const watch: BodyWatch = { request, socket, startedAt: Date.now(), bytesAtStart: socket.bytesRead };
    this.bodies.add(watch);
    const done = () => this.bodies.delete(watch);
    request.once('end', done);
    request.once('close', done);
    this.startTimer();
  }

  /**
   * A body that has not arrived by its deadline is cut with 408, as Node does at body_timeout_ms.
   * The deadline grows with what arrived (as Apache's mod_reqtimeout MinRate): the grace period
   * plus one second per `bodyMinBytesPerSecond` bytes. Time while the app does not read the body
   * (a paused stream) does not count against the client.
   */
  private checkBodies(now: number): void {
    const { bodyMinBytesPerSecond, bodyMinRateGraceMs } = this.bounds;
    for (const watch of this.bodies) {
      const { request, socket } = watch;
      if (request.complete || socket.destroyed) {
        this.bodies.delete(watch);
        continue;
      }
      if (request.readableFlowing !== true || request.readableLength >= request.readableHighWaterMark) {
        // The app is not reading: restart the clock once it does.
        watch.startedAt = now;
        watch.bytesAtStart = socket.bytesRead;
        continue;
      }
      const received = socket.bytesRead - watch.bytesAtStart;
      const deadline = watch.startedAt + bodyMinRateGraceMs + (received * 1000) / bodyMinBytesPerSecond;
      if (now <= deadline) continue;
      this.bodies.delete(watch);
      this.refused('slow_body', socket);
      const error = Object.assign(new Error('The request body arrived below the minimum rate.'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
      // The server's clientError handler (http-server.ts) answers 408 and closes, as for body_timeout_ms.
      const server = this.server;
      if (server && server.listenerCount('clientError') > 0) server.emit('clientError', error, socket);
      else socket.destroy();
    }
  }

  private refused(reason: ConnectionRefusal, socket: Socket): void {
    this.events?.refused(reason);
    const now = Date.now();
    const episode = this.episodes.get(reason);
    if (episode) {
      episode.last = now;
      episode.refused += 1;
      return;
    }
    this.episodes.set(reason, { since: now, last: now, refused: 1 });
    this.log?.warn(
      {
        reason,
        client_address: socket.remoteAddress,
        open_connections: this.open,
        max_connections: this.maxConnections,
        max_connections_per_address: this.bounds.maxPerAddress,
        open_files_soft_limit: this.softLimit,
      },
      'connection pressure: refusing or cutting connections (one line per episode; see nova_connections_refused_total)',
    );
    this.startTimer();
  }

  private startTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.tick(), Math.min(CHECK_INTERVAL_MS, Math.max(50, this.bounds.bodyMinRateGraceMs / 10)));
    this.timer.unref();
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    const now = Date.now();
    this.checkBodies(now);
    for (const [reason, episode] of this.episodes) {
      if (now - episode.last < EPISODE_QUIET_MS) continue;
      this.episodes.delete(reason);
      this.log?.info(
        { reason, refused: episode.refused, duration_ms: episode.last - episode.since, open_connections: this.open },
        'connection pressure ended',
      );
    }
    if (this.bodies.size === 0 && this.episodes.size === 0) this.stopTimer();
  }
}
