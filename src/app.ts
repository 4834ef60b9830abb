import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import type { Logger } from 'pino';
import type { AppContext } from './app-context.js';
import { Authenticator, type AuthEvents } from './auth/authenticator.js';
import { KeyCache } from './auth/key-cache.js';
import type { GatewayConfig } from './config/gateway-config.js';
import { installAccessLog } from './http/access-log.js';
import { installErrorHandling } from './http/error-handler.js';
import { shuttingDown } from './http/errors.js';
import { installJsonParser } from './http/json-body.js';
import { requestIdOf } from './http/request-id.js';
import { installValidators } from './http/validation.js';
import { adminRoutes } from './routes/admin.js';
import { healthRoutes } from './routes/health.js';
import { v1Routes } from './routes/v1.js';
import { StoreUnavailableError, type Store } from './store/types.js';
import { Metrics } from './metrics/metrics.js';
import type { UsageMeter } from './quota/usage-meter.js';
import { Admission } from './quota/admission.js';
import { ManagementLimit } from './quota/management-limit.js';
import { RequestCharges } from './quota/request-charge.js';
import { BufferedUsageMeter } from './quota/buffered-usage-meter.js';
import { installMetricsHooks, metricsRoute } from './metrics/metrics-endpoint.js';
import { ModelRegistry } from './upstream/model-registry.js';

export interface AppDeps {
  config: GatewayConfig;
  store: Store;
  logger?: Logger | false;
  adminToken?: string;
  now?: () => number;
  authEvents?: AuthEvents;
  usage?: UsageMeter;
  metrics?: Metrics;
  /** Serve GET /metrics on this app (METRICS_PORT=0); otherwise the process serves it apart. */
  serveMetrics?: boolean;
  /** Where upstream keys (models[].api_key_env) are read; default process.env. */
  env?: NodeJS.ProcessEnv;
}

export interface App {
  app: FastifyInstance;
  ctx: AppContext;
}

/** Builds the HTTP app from its dependencies; no process globals, so tests build it freely. */
export async function buildApp(deps: AppDeps): Promise<App> {
  const { config, store } = deps;
  const app = Fastify({
    loggerInstance: (deps.logger || undefined) as FastifyBaseLogger | undefined,
    bodyLimit: config.server.body_limit_bytes,
    trustProxy: config.server.trust_proxy,
    genReqId: requestIdOf,
    logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
    return503OnClosing: false,
  });

  const now = deps.now ?? Date.now;
  const metrics = deps.metrics ?? new Metrics({ defaultMetrics: false, projectLabel: config.metrics.project_label });
  const usage = deps.usage ?? createUsageMeter(config, store, metrics, app);
  const authenticator = new Authenticator({
    store,
    cache: new KeyCache(config.auth.cache_ttl_ms, undefined, now),
    failedAttempts: store.createLimiter({
      keyPrefix: 'auth-failures',
      points: config.auth.failed_attempts.max,
      durationSeconds: config.auth.failed_attempts.window_seconds,
      blockDurationSeconds: config.auth.failed_attempts.block_seconds,
    }),
    events: deps.authEvents ?? metrics.auth.events,
    now,
    onBackgroundError: (error) => app.log.warn({ err: error }, 'background store write failed'),
  });
  const ctx: AppContext = {
    config,
    store,
    authenticator,
    adminToken: deps.adminToken,
    now,
    lifecycle: { draining: false, inFlight: 0 },
    usage,
    metrics,
    admission: new Admission({
      store,
      config,
      metrics: metrics.quota,
      onStoreError: (error) => app.log.warn({ err: error }, 'rate limiter store unavailable: using the per-replica fallback'),
    }),
    managementLimit: new ManagementLimit(
      store.createLimiter({
        keyPrefix: 'management',
        points: config.rate_limits.management_requests_per_minute,
        durationSeconds: config.rate_limits.window_seconds,
      }),
      config.rate_limits.management_requests_per_minute,
    ),
    charges: new RequestCharges(config),
    models: new ModelRegistry(config.models, deps.env ?? process.env),
  };
  app.addHook('onClose', async () => {
    ctx.admission.close();
    await ctx.models.close();
  });

  installValidators(app);
  installJsonParser(app);
  installErrorHandling(app, config.server.body_limit_bytes);
  installMetricsHooks(app, metrics);
  installAccessLog(app);
  if (deps.serveMetrics) metricsRoute(app, metrics.registry);

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    ctx.lifecycle.inFlight++;
    // 'close' fires for finished and for aborted responses alike.
    reply.raw.once('close', () => ctx.lifecycle.inFlight--);
    if (ctx.lifecycle.draining && !request.url.startsWith('/livez') && !request.url.startsWith('/readyz')) {
      throw shuttingDown();
    }
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'nova-gateway', version: '1' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  await app.register(healthRoutes, { ctx });
  await app.register(v1Routes, { ctx });
  if (deps.adminToken) await app.register(adminRoutes, { ctx, adminToken: deps.adminToken });

  await app.ready();
  return { app, ctx };
}

/** The Redis-backed (or in-memory) usage meter; its last flush runs when the app closes. */
function createUsageMeter(config: GatewayConfig, store: Store, metrics: Metrics, app: FastifyInstance): UsageMeter {
  const meter = new BufferedUsageMeter({
    store: store.usage,
    metrics: metrics.usage,
    retention: {
      minuteMs: config.usage.minute_retention_hours * 3_600_000,
      hourMs: config.usage.hour_retention_days * 86_400_000,
      dedupMs: 86_400_000,
    },
    maxBuffered: config.usage.buffer_max_records,
    flushIntervalMs: config.usage.flush_interval_ms,
    onError: (error, what) => {
      if (error instanceof StoreUnavailableError) metrics.quota.storeErrors.inc({ operation: 'usage_flush' });
      app.log.warn({ err: error }, `${what} failed`);
    },
  }).start();
  app.addHook('onClose', () => meter.close());
  return meter;
}
