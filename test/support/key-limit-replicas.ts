import { randomBase62 } from '../../src/core/ids.js';
import type { GatewayProcess } from './gateway-process.js';
import { LoopbackUpstream } from './loopback-upstream.js';
import { ReplicaPair } from './replica-pair.js';
import type { TestProject } from './test-app.js';

const HI = [{ role: 'user', content: 'hi' }];

/** A stream opened through a replica: its status, and the abort that ends it (and frees its slot). */
export interface OpenStream {
  status: number;
  response: Response;
  abort: () => void;
}

/** A model call's status, `x-ratelimit-scope`, headers and JSON body. */
export interface Answer {
  status: number;
  scope: string | null;
  headers: Headers;
  body: { error?: { type?: string; code?: string; message?: string } } & Record<string, unknown>;
}

/**
 * Two real gateway processes on one Redis (standalone or Cluster) in front of a fake OpenAI
 * upstream on 127.0.0.1, for issue 32's key limits: projects with a policy, keys with limits of
 * their own, chat calls and held-open streams through either replica. Models:
 * - `slow-1`: 2 prompt + 5 completion tokens after 500 ms (no request settles during a burst);
 * - `hold-1`: a stream of 120 chunks 250 ms apart (held open for 30 s unless aborted).
 */
export class KeyLimitReplicas {
  private constructor(
    readonly pair: ReplicaPair,
    private readonly upstream: LoopbackUpstream,
  ) {}

  /** `rateLimits`: the config's `rate_limits` section as YAML lines (e.g. `lease_ttl_seconds: 4`). */
  static async start(options: { redisUrl: string; redisMode: 'standalone' | 'cluster'; rateLimits?: string[] }): Promise<KeyLimitReplicas> {
    const upstream = await LoopbackUpstream.start({
      slow: { latencyMs: 500, promptTokens: 2, chunks: ['a', 'b', 'c', 'd', 'e'] },
      hold: { chunks: Array.from({ length: 120 }, (_, i) => `w${i} `), chunkDelayMs: 250 },
    });
    const rateLimits = options.rateLimits?.length ? ['rate_limits:', ...options.rateLimits.map((line) => `  ${line}`)] : [];
    const configYaml = [
      'models:',
      '  - id: slow-1',
      `    upstream: ${upstream.baseUrl('slow')}`,
      '  - id: hold-1',
      `    upstream: ${upstream.baseUrl('hold')}`,
      '    timeout_ms: 60000',
      'redis:',
      `  key_prefix: klr${randomBase62(8)}`,
      'usage:',
      '  flush_interval_ms: 200',
      ...rateLimits,
      '',
    ].join('\n');
    const env = { REDIS_URL: options.redisUrl, REDIS_MODE: options.redisMode, NOVA_ADMIN_TOKEN: `klr-admin-${randomBase62(24)}`, LOG_LEVEL: 'warn' };
    try {
      return new KeyLimitReplicas(await ReplicaPair.start({ env, configYaml }), upstream);
    } catch (error) {
      await upstream.close();
      throw error;
    }
  }

  get a(): GatewayProcess {
    return this.pair.a;
  }

  get b(): GatewayProcess {
    return this.pair.b;
  }

  /** Replica `i % 2`: a, b, a, b… */
  at(i: number): GatewayProcess {
    return this.pair.at(i);
  }

  async stop(): Promise<void> {
    await this.pair.stop();
    await this.upstream.close();
  }

  /** A project created on replica a, its policy set through replica b's admin API. */
  async project(policy: Record<string, unknown>): Promise<TestProject> {
    const project = await this.a.createProject({ name: 'key-limits' });
    await this.pair.patchProject(project, policy);
    return project;
  }

  /** A new key of `project` with `limits` (`rate_limits`, `budgets`), created through replica b. */
  async key(project: TestProject, limits: Record<string, unknown>): Promise<TestProject> {
    const response = await this.pair.post(this.b, project, '/v1/api-keys', { name: 'agent', project_id: project.projectId, ...limits });
    const body = (await response.json()) as { id: string; secret: string };
    if (response.status !== 200) throw new Error(`key creation failed: ${response.status} ${JSON.stringify(body)}`);
    return { projectId: project.projectId, keyId: body.id, secret: body.secret, auth: { authorization: `Bearer ${body.secret}` } };
  }

  /** A chat call of `slow-1` (reserving 17 + 5 tokens) through `gateway`, answered. */
  async chat(gateway: GatewayProcess, key: TestProject): Promise<Answer> {
    const response = await this.pair.post(gateway, key, '/v1/chat/completions', { model: 'slow-1', messages: HI, max_tokens: 5 });
    return { status: response.status, scope: response.headers.get('x-ratelimit-scope'), headers: response.headers, body: (await response.json()) as Answer['body'] };
  }

  /** Opens a `hold-1` stream through `gateway` and reads its first bytes: admitted, it holds a slot until aborted. */
  async openStream(gateway: GatewayProcess, key: TestProject): Promise<OpenStream> {
    const controller = new AbortController();
    const response = await this.pair.post(gateway, key, '/v1/chat/completions', { model: 'hold-1', messages: HI, stream: true }, controller.signal);
    if (response.status === 200) await response.body!.getReader().read();
    return { status: response.status, response, abort: () => controller.abort() };
  }

  /** A refused stream's error body (a 429's JSON). */
  static async errorOf(stream: OpenStream): Promise<Answer['body']['error']> {
    return ((await stream.response.json()) as Answer['body']).error;
  }
}
