import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './redis-server.js';
import type { TestProject } from './test-app.js';

const ROOT = new URL('../../', import.meta.url).pathname;

/** A config with the echo model and short store timings, for tests that take Redis away. */
export function echoConfig(options: { commandTimeoutMs: number; flushIntervalMs: number }): string {
  return [
    'models:',
    '  - id: echo-1',
    '    provider: echo',
    'redis:',
    `  command_timeout_ms: ${options.commandTimeoutMs}`,
    'usage:',
    `  flush_interval_ms: ${options.flushIntervalMs}`,
    '',
  ].join('\n');
}

/** The real server process (src/server.ts through tsx), with its log lines kept for inspection. */
export class GatewayProcess {
  readonly logs: string[] = [];
  /** The METRICS_PORT the process was given (0: /metrics on the main port). */
  metricsPort = 0;
  private adminToken: string | undefined;
  private exitCode: number | null | undefined;
  private readonly exited: Promise<number | null>;

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
    /** The temporary config directory, removed when the process exits. */
    private readonly configDir: string | undefined,
  ) {
    const collect = (chunk: Buffer) => this.logs.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    this.exited = new Promise((resolve) =>
      child.once('exit', (code) => {
        this.exitCode = code;
        if (this.configDir) rmSync(this.configDir, { recursive: true, force: true });
        resolve(code);
      }),
    );
  }

  /** `waitForReady: false` returns as soon as the process is spawned (start-up and failure tests). */
  static async start(options: { env?: Record<string, string>; configYaml?: string; waitForReady?: boolean } = {}): Promise<GatewayProcess> {
    const port = await freePort();
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      PORT: String(port),
      HOST: '127.0.0.1',
      METRICS_PORT: String(await freePort()),
      LOG_LEVEL: 'info',
      ...options.env,
    };
    const configDir = options.configYaml ? mkdtempSync(join(tmpdir(), 'nova-config-')) : undefined;
    if (configDir) {
      env.NOVA_CONFIG = join(configDir, 'gateway.yaml');
      writeFileSync(env.NOVA_CONFIG, options.configYaml!);
    }
    // NOVA_GATEWAY_NODE: another Node binary for the server (to try the server on a Node other than the test runner's).
    const node = process.env.NOVA_GATEWAY_NODE || process.execPath;
    const child = spawn(node, ['--import', 'tsx', 'src/server.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const gateway = new GatewayProcess(child, Number(env.PORT), configDir);
    gateway.metricsPort = Number(env.METRICS_PORT);
    gateway.adminToken = env.NOVA_ADMIN_TOKEN;
    if (options.waitForReady ?? true) {
      // A gateway that never became ready is stopped, not left running to slow every test after it.
      await gateway.waitUntilReady().catch(async (error: unknown) => {
        await gateway.stop();
        throw error;
      });
    }
    return gateway;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Bootstraps a project through this process's admin API (its NOVA_ADMIN_TOKEN). */
  async createProject(body: Record<string, unknown> = { name: 'test project' }): Promise<TestProject> {
    const response = await fetch(`${this.url}/admin/v1/projects`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (response.status !== 200) throw new Error(`project bootstrap failed: ${response.status} ${await response.text()}`);
    const project = (await response.json()) as { id: string; api_key: { id: string; secret: string } };
    return {
      projectId: project.id,
      keyId: project.api_key.id,
      secret: project.api_key.secret,
      auth: { authorization: `Bearer ${project.api_key.secret}` },
    };
  }

  async waitUntilReady(timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.exitCode !== undefined) throw new Error(`gateway exited with ${this.exitCode}:\n${this.logs.join('\n')}`);
      try {
        const response = await fetch(`${this.url}/readyz`);
        if (response.ok) return;
      } catch {
        // not listening yet
      }
      await sleep(100);
    }
    throw new Error(`gateway not ready after ${timeoutMs} ms:\n${this.logs.join('\n')}`);
  }

  /** Waits for a log line (stdout or stderr; lines are written asynchronously, after the response) and returns it. */
  async waitForLog(match: RegExp | ((line: string) => boolean), timeoutMs = 15_000): Promise<string> {
    const test = typeof match === 'function' ? match : (line: string) => match.test(line);
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const line = this.logs.find(test);
      if (line !== undefined) return line;
      if (this.exitCode !== undefined) break;
      await sleep(25);
    }
    throw new Error(`no log line matching ${String(match)} (exit ${this.exitCode}):\n${this.logs.join('\n')}`);
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  waitForExit(): Promise<number | null> {
    return this.exited;
  }

  async stop(): Promise<number | null> {
    if (this.exitCode === undefined) this.child.kill('SIGTERM');
    const code = await Promise.race([this.exited, sleep(15_000).then(() => 'timeout' as const)]);
    if (code === 'timeout') {
      this.child.kill('SIGKILL');
      return this.exited;
    }
    return code;
  }
}
