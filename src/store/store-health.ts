import { EventEmitter } from 'node:events';
import { describeStoreError, VAGUE_CAUSES } from './store-errors.js';

/** The two log levels the monitor writes at (a pino logger fits). */
export interface HealthLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** What the monitor watches of a Redis client: its connection events. */
export interface WatchedClient {
  on(event: 'ready' | 'close', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

export interface StoreHealthOptions {
  /** Where the store lives, as log lines name it ("127.0.0.1:6379", "cluster …"). */
  target: string;
  ping: () => Promise<void>;
  log: HealthLog;
  /** How often an unreachable store is probed, to notice its return without client traffic. */
  probeIntervalMs?: number;
  /** The address the client is connected to now (differs from target behind Sentinel). */
  address?: () => string | undefined;
  now?: () => number;
}

type State = 'starting' | 'up' | 'down' | 'closed';

/**
 * The store's reachability as this process sees it, and the log lines about it: one warn
 * line when an outage starts (with the cause), one info line when it ends (with how long it
 * lasted and how many operations failed meanwhile), instead of a line per failed request.
 * Emits 'up' and 'down'.
 */
export class StoreHealth extends EventEmitter {
  private state: State = 'starting';
  private lastClientError: Error | undefined;
  private downSince = 0;
  private failures = 0;
  private probe: NodeJS.Timeout | undefined;
  private lastAddress: string | undefined;
  private everUp = false;
  private readonly now: () => number;

  constructor(private readonly options: StoreHealthOptions) {
    super();
    this.now = options.now ?? Date.now;
  }

  get reachable(): boolean {
    return this.state === 'up';
  }

  /** Follows a Redis client's connection events; 'error' events only refine the cause. */
  watch(client: WatchedClient): this {
    client.on('error', (error) => (this.lastClientError = error));
    client.on('ready', () => this.up());
    client.on('close', () => {
      if (this.state === 'up') this.down(this.lastClientError ?? new Error('connection closed'));
    });
    return this;
  }

  /** Start-up is over: says whether the store answered, and how not, if it did not. */
  begin(connected: boolean): void {
    if (this.state !== 'starting') return;
    if (connected) this.up();
    else this.down(this.lastClientError ?? new Error('connection timed out'));
  }

  /** A store operation failed for want of the store (callers pass StoreUnavailableError only). */
  failed(error: unknown): void {
    if (this.state === 'closed') return;
    if (this.state === 'up') this.down(error);
    this.failures++;
  }

  /** Stops probing and reporting: the process is closing the store on purpose. */
  close(): void {
    this.stopProbing();
    this.state = 'closed';
  }

  private stopProbing(): void {
    clearInterval(this.probe);
    this.probe = undefined;
  }

  private causeOf(error: unknown): string {
    const cause = describeStoreError(error);
    if (VAGUE_CAUSES.has(cause) && this.lastClientError) return describeStoreError(this.lastClientError);
    // A command refused for want of a connection, after the store was up: the connection closed
    // (Redis closed it without an error, e.g. on SHUTDOWN, and the request noticed before the client's event).
    if (cause === 'not connected' && this.everUp) return 'connection closed';
    return cause;
  }

  private where(): string {
    const address = this.options.address?.();
    return address && !this.options.target.includes(address) ? `${this.options.target} (at ${address})` : this.options.target;
  }

  private down(error: unknown): void {
    const starting = this.state === 'starting';
    this.state = 'down';
    this.downSince = this.now();
    this.failures = 0;
    const cause = this.causeOf(error);
    if (starting) {
      this.options.log.warn({ store: this.options.target, cause }, `Redis at ${this.where()} is not reachable (${cause}): not ready (/readyz answers 503) until it is`);
    } else {
      this.options.log.warn(
        { store: this.options.target, cause },
        `Redis at ${this.where()} is unreachable (${cause}): requests that need it answer 503 until it is back; failures are counted in nova_redis_errors_total`,
      );
    }
    this.probe ??= setInterval(() => void this.tryProbe(), this.options.probeIntervalMs ?? 1000).unref();
    this.emit('down', cause);
  }

  private up(): void {
    if (this.state === 'up' || this.state === 'closed') return;
    const wasDown = this.state === 'down';
    this.state = 'up';
    this.stopProbing();
    this.lastClientError = undefined;
    const address = this.options.address?.();
    const moved = this.lastAddress !== undefined && address !== undefined && address !== this.lastAddress;
    if (wasDown && !this.everUp) {
      this.options.log.info({ store: this.options.target, address }, `Redis at ${this.where()} is reachable`);
    } else if (wasDown) {
      const downMs = this.now() - this.downSince;
      const fields = { store: this.options.target, down_ms: downMs, failed_operations: this.failures, address };
      const after = `after ${(downMs / 1000).toFixed(1)} s; ${this.failures} store operations failed meanwhile`;
      this.options.log.info(fields, `Redis at ${this.where()} is reachable again ${after}${moved ? ` (was at ${this.lastAddress})` : ''}`);
    }
    if (address !== undefined) this.lastAddress = address;
    this.everUp = true;
    this.emit('up', address);
  }

  private async tryProbe(): Promise<void> {
    try {
      await this.options.ping();
      this.up();
    } catch {
      // Still away: the outage was reported when it began.
    }
  }
}
