// A redis-server child process, shared by the tests (test/support/redis-server.ts re-exports it)
// and the benchmark (bench/run.ts), which imports nothing from test/.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { freePort } from './free-port.js';

/** Resolves once a Redis at `url` answers PING; fails after `timeoutMs`. */
export async function waitForRedis(url: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.ping();
      client.disconnect();
      return;
    } catch (error) {
      client.disconnect();
      if (Date.now() > deadline) throw new Error(`redis at ${url} did not answer: ${(error as Error).message}`);
      await sleep(50);
    }
  }
}

/** A redis-server child process on a loopback port: the fault tests stop, freeze and restart it. */
export class RedisProcess {
  private child: ChildProcess | null = null;
  readonly dir: string;

  private constructor(
    readonly port: number,
    private readonly extraArgs: string[],
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'nova-redis-'));
  }

  /** Without a given port, a start that loses its port to a parallel test is retried on another (three times in all). */
  static async start(options: { port?: number; args?: string[] } = {}): Promise<RedisProcess> {
    for (let attempt = 1; ; attempt++) {
      const redis = new RedisProcess(options.port ?? (await freePort()), options.args ?? []);
      try {
        await redis.spawn();
        return redis;
      } catch (error) {
        await redis.stop();
        if (options.port !== undefined || attempt === 3) throw error;
      }
    }
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async spawn(): Promise<void> {
    this.child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--appendonly', 'no', ...this.extraArgs],
      { stdio: 'ignore' },
    );
    await waitForRedis(this.url);
  }

  /** SIGSTOP: the process keeps its sockets but answers nothing (a hung Redis). */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  thaw(): void {
    this.child?.kill('SIGCONT');
  }

  /** SHUTDOWN SAVE, so a restart loads the dump: a Redis that goes down and comes back. */
  async shutdownWithSave(): Promise<void> {
    const client = new Redis(this.url, { maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    const exited = new Promise((resolve) => this.child?.once('exit', resolve));
    await client.call('SHUTDOWN', 'SAVE').catch(() => undefined);
    client.disconnect();
    await exited;
    this.child = null;
  }

  async stop(): Promise<void> {
    if (this.child && this.child.exitCode === null) {
      const exited = new Promise((resolve) => this.child?.once('exit', resolve));
      this.child.kill('SIGCONT');
      this.child.kill('SIGKILL');
      await exited;
    }
    this.child = null;
    rmSync(this.dir, { recursive: true, force: true });
  }
}
