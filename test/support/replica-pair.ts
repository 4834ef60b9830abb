import { setTimeout as sleep } from 'node:timers/promises';
import { GatewayProcess } from './gateway-process.js';
import type { TestProject } from './test-app.js';
import type { UsageAnswer } from './usage-answer.js';

/**
 * Two real gateway processes on one Redis, seen the way a tenant and an operator see them: the
 * public API (calls alternate between the replicas), the admin API and /metrics. For the e2e tests
 * that check what a project is charged against what its upstream served.
 */
export class ReplicaPair {
  private turn = 0;

  private constructor(
    readonly a: GatewayProcess,
    readonly b: GatewayProcess,
    private readonly adminToken: string,
  ) {}

  /** Starts both and waits up to `readyTimeoutMs` (on a loaded machine tsx's start-up alone can take 20 s) for both to be ready. */
  static async start(options: { env: Record<string, string>; configYaml: string; readyTimeoutMs?: number }): Promise<ReplicaPair> {
    const spawn = { env: options.env, configYaml: options.configYaml, waitForReady: false };
    const [a, b] = await Promise.all([GatewayProcess.start(spawn), GatewayProcess.start(spawn)]);
    try {
      await Promise.all([a.waitUntilReady(options.readyTimeoutMs ?? 60_000), b.waitUntilReady(options.readyTimeoutMs ?? 60_000)]);
    } catch (error) {
      await Promise.all([a.stop(), b.stop()]);
      throw error;
    }
    return new ReplicaPair(a, b, options.env.NOVA_ADMIN_TOKEN ?? '');
  }

  async stop(): Promise<void> {
    await Promise.all([this.a.stop(), this.b.stop()]);
  }

  /** Replica `i % 2`: a, b, a, b… */
  at(i: number): GatewayProcess {
    return i % 2 === 0 ? this.a : this.b;
  }

  /** The next replica in turn. */
  next(): GatewayProcess {
    return this.at(this.turn++);
  }

  private get admin() {
    return { authorization: `Bearer ${this.adminToken}`, 'content-type': 'application/json' };
  }

  /**
   * A project created on replica a with a generous request rate (so only the limits under test
   * bind) and `policy`, then patched through replica b's admin API where it names
   * `max_conversation_bytes` (settable only there).
   */
  async project(name: string, policy: Record<string, unknown> = {}): Promise<TestProject> {
    const { max_conversation_bytes: maxConversationBytes, ...rest } = policy;
    const project = await this.a.createProject({ name, requests_per_minute: 100_000, burst_limit: 1000, ...rest });
    if (maxConversationBytes !== undefined) await this.patchProject(project, { max_conversation_bytes: maxConversationBytes });
    return project;
  }

  /** PATCH /admin/v1/projects/{id} through replica b. */
  async patchProject(project: TestProject, body: Record<string, unknown>): Promise<void> {
    const response = await fetch(`${this.b.url}/admin/v1/projects/${project.projectId}`, { method: 'PATCH', headers: this.admin, body: JSON.stringify(body) });
    if (response.status !== 200) throw new Error(`admin PATCH failed: ${response.status} ${await response.text()}`);
  }

  /** A model call: POST `path` with a JSON body through `gateway`. */
  post(gateway: GatewayProcess, project: TestProject, path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
    return fetch(`${gateway.url}${path}`, {
      method: 'POST',
      headers: { ...project.auth, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
  }

  /** `count` concurrent calls alternating between the replicas; each answer's status and body. */
  async burst(project: TestProject, count: number, bodyOf: (i: number) => unknown, path = '/v1/chat/completions'): Promise<Array<{ status: number; body: string }>> {
    return Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const response = await this.post(this.at(i), project, path, bodyOf(i));
        return { status: response.status, body: await response.text() };
      }),
    );
  }

  /** GET /v1/projects/{id}/usage (the last 24 h) through the next replica. */
  async usage(project: TestProject): Promise<UsageAnswer> {
    const response = await fetch(`${this.next().url}/v1/projects/${project.projectId}/usage`, { headers: project.auth });
    if (response.status !== 200) throw new Error(`usage read failed: ${response.status} ${await response.text()}`);
    return (await response.json()) as UsageAnswer;
  }

  async usageTokens(project: TestProject): Promise<number> {
    return (await this.usage(project)).tokens.total;
  }

  /** One model's row of the usage (the last 24 h): its requests and tokens (zeros before any shows). */
  async usageOfModel(project: TestProject, model: string): Promise<{ requests: number; tokens: number }> {
    const response = await fetch(`${this.next().url}/v1/projects/${project.projectId}/usage?group_by=model`, { headers: project.auth });
    if (response.status !== 200) throw new Error(`usage read failed: ${response.status} ${await response.text()}`);
    const row = ((await response.json()) as UsageAnswer).groups?.find((group) => group.model === model);
    return { requests: row?.requests ?? 0, tokens: row?.tokens.total ?? 0 };
  }

  /**
   * The project's stored-conversation bytes and bound (admin GET), read through a and then b: a
   * read on a replica is ordered after that replica's own conversation writes, so the second read
   * sees both replicas' writes of the replies already answered.
   */
  async conversations(project: TestProject): Promise<{ bytes_held: number; max_bytes: number }> {
    let held = { bytes_held: 0, max_bytes: 0 };
    for (const gateway of [this.a, this.b]) {
      const response = await fetch(`${gateway.url}/admin/v1/projects/${project.projectId}`, { headers: this.admin });
      if (response.status !== 200) throw new Error(`admin GET failed: ${response.status} ${await response.text()}`);
      held = ((await response.json()) as { conversations: { bytes_held: number; max_bytes: number } }).conversations;
    }
    return held;
  }

  /** The sum over both replicas of a counter's series that carry every label of `labels`. */
  async metric(name: string, labels: Record<string, string>): Promise<number> {
    let sum = 0;
    for (const gateway of [this.a, this.b]) {
      const port = gateway.metricsPort || gateway.port;
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      for (const line of text.split('\n')) {
        if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
        if (Object.entries(labels).every(([label, value]) => line.includes(`${label}="${value}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
    }
    return sum;
  }
}

/**
 * Reads `read` every 100 ms until `done` holds of its value or `timeoutMs` pass; returns the last
 * value either way, for the test to assert on (so a failure shows the numbers, not a timeout).
 */
export async function settle<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await sleep(100);
  }
}
