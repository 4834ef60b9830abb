import { inject } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp, type AppDeps } from '../../src/app.js';
import type { AppContext } from '../../src/routes/app-context.js';
import { defaultConfig, type GatewayConfig } from '../../src/config/gateway-config.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/connect.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { Store } from '../../src/store/types.js';
import { randomBase62 } from '../../src/core/ids.js';

export type StoreKind = 'memory' | 'redis';
export const STORE_KINDS: StoreKind[] = ['memory', 'redis'];

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

/** A store of the given kind; Redis stores get a fresh key prefix so tests never see each other's data. */
export async function createTestStore(kind: StoreKind, options: { prefix?: string; url?: string } = {}): Promise<Store> {
  if (kind === 'memory') return new MemoryStore();
  const client = createRedisClient({ url: options.url ?? inject('redisUrl'), mode: 'standalone', commandTimeoutMs: 2000 });
  client.on('error', () => undefined);
  await waitUntilReady(client, 5000);
  return new RedisStore(client, options.prefix ?? `t${randomBase62(10)}`);
}

export interface TestApp {
  app: FastifyInstance;
  ctx: AppContext;
  store: Store;
  close(): Promise<void>;
}

export async function buildTestApp(
  kind: StoreKind,
  options: { config?: GatewayConfig; store?: Store; deps?: Partial<AppDeps> } = {},
): Promise<TestApp> {
  const store = options.store ?? (await createTestStore(kind));
  const { app, ctx } = await buildApp({
    config: options.config ?? defaultConfig(),
    store,
    adminToken: ADMIN_TOKEN,
    logger: false,
    ...options.deps,
  });
  return {
    app,
    ctx,
    store,
    close: async () => {
      await app.close();
      if (!options.store) await store.close();
    },
  };
}

export interface TestProject {
  projectId: string;
  keyId: string;
  secret: string;
  auth: { authorization: string };
}

/** Creates a project through the admin API and returns its first key. */
export async function createProject(app: FastifyInstance, body: Record<string, unknown> = { name: 'test project' }): Promise<TestProject> {
  const response = await app.inject({
    method: 'POST',
    url: '/admin/v1/projects',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    payload: body,
  });
  if (response.statusCode !== 200) throw new Error(`project bootstrap failed: ${response.body}`);
  const project = response.json();
  return {
    projectId: project.id,
    keyId: project.api_key.id,
    secret: project.api_key.secret,
    auth: { authorization: `Bearer ${project.api_key.secret}` },
  };
}

/** Asserts the error envelope of DESIGN.md section 4. */
export function errorOf(response: { statusCode: number; json(): unknown }) {
  const body = response.json() as { error: { type: string; code: string; param?: string; message: string } };
  return { status: response.statusCode, ...body.error };
}
