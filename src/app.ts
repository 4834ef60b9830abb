import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import type { Logger } from 'pino';
import type { AppContext } from './routes/app-context.js';
import { Authenticator, type AuthEvents } from './auth/authenticator.js';
import { FailedAttempts } from './auth/failed-attempts.js';
import { KeyCache } from './auth/key-cache.js';
import type { GatewayConfig } from './config/gateway-config.js';
import { installAccessLog } from './http/access-log.js';
import { installErrorHandling } from './http/error-handler.js';
import { shuttingDown } from './http/errors.js';
import { clientErrorHandler, gatewayServerFactory } from './http/http-server.js';
import { installJsonParser } from './http/json-body.js';
import { installSlowReaders } from './http/slow-readers.js';
import { refuseRepeatedAuthorization } from './http/repeated-headers.js';
import { speaksAnthropic } from './http/anthropic-errors.js';
import { requestIdOf } from './http/request-id.js';
import { installValidators } from './http/validation.js';
import { adminRoutes } from './routes/admin/admin.js';
import { healthRoutes } from './routes/health.js';
import { v1Routes } from './routes/v1.js';
import { StoreHealth } from './store/store-health.js';
import { StoreUnavailableError, type Store } from './store/types.js';
import { Metrics } from './metrics/metrics.js';
import type { UsageMeter } from './quota/usage-meter.js';
import { Admission } from './quota/admission.js';
import { ManagementLimit } from './quota/management-limit.js';
import { RequestCharges } from './quota/request-charge.js';
import { BufferedUsageMeter } from './quota/buffered-usage-meter.js';
import { installMetricsHooks, metricsRoute } from './metrics/metrics-endpoint.js';
import { ModelRegistry } from './model-call/model-registry.js';
import { Alerts } from './alerts/alerts.js';
import { ConsoleSessions, sessionSecretOf } from './auth/console-session.js';
import { consoleRoutes } from './routes/console.js';
import type { Tracing } from './tracing/tracing.js';
import { installRequestSpans } from './tracing/request-spans.js';

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
  /** Seals console session cookies (NOVA_CONSOLE_SECRET); default: the admin token, else one of this process. */
  consoleSecret?: string;
  /** OpenTelemetry traces (src/tracing/), started by the process when the OTEL_* variables ask for them; absent: off. */
  tracing?: Tracing | null;
  /** The built console's files; default dist/console of this installation. */
  consoleRoot?: string;
  /** The store's reachability and its log lines; default: one built here, logging through the app. */
  storeHealth?: StoreHealth;
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
    // server.ts drains in-flight work before it closes the app; what is left then is cut, not awaited.
    forceCloseConnections: true,
    serverFactory: gatewayServerFactory(config.server, { events: deps.metrics?.connections.events, log: deps.logger || undefined }),
    clientErrorHandler,
  });

  const now = deps.now ?? Date.now;
  const metrics = deps.metrics ?? new Metrics({ defaultMetrics: false, projectLabel: config.metrics.project_label });
  const health = deps.storeHealth ?? ownStoreHealth(store, app);
  metrics.store.follow(health);
  // A store outage is one warn line (StoreHealth), not one per failed operation; other errors stay loud.
  const storeFailed = (what: string) => (error: unknown) => {
    if (error instanceof StoreUnavailableError) health.failed(error);
    else app.log.warn({ err: error }, `${what} failed`);
  };
  const usage = deps.usage ?? createUsageMeter(config, store, metrics, app, health);
  const onBackgroundError = storeFailed('background store write');
  // One allowance per client address for failed API keys and failed admin tokens together.
  const failedAttempts = new FailedAttempts(
    store.createLimiter({
      keyPrefix: 'auth-failures',
      points: config.auth.failed_attempts.max,
      durationSeconds: config.auth.failed_attempts.window_seconds,
      blockDurationSeconds: config.auth.failed_attempts.block_seconds,
    }),
    onBackgroundError,
  );
  const authenticator = new Authenticator({
    store,
    cache: new KeyCache(config.auth.cache_ttl_ms, undefined, now),
    failedAttempts,
    events: deps.authEvents ?? metrics.auth.events,
    now,
    onBackgroundError,
  });
  const ctx: AppContext = {
    config,
    store,
    authenticator,
    failedAttempts,
    adminToken: deps.adminToken,
    now,
    lifecycle: { draining: false, inFlight: 0 },
    usage,
    metrics,
    admission: new Admission({
      store,
      config,
      now,
      metrics: metrics.quota,
      onStoreError: storeFailed('rate limiter'),
      usage,
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
    models: new ModelRegistry(config.models, deps.env ?? process.env, {
      ...metrics.modelTraffic.fleetObserver,
      ejected: (model, upstream) => {
        metrics.modelTraffic.fleetObserver.ejected(model, upstream);
        app.log.warn({ model, upstream }, 'upstream target ejected');
      },
    }),
    alerts: new Alerts({ config, store, now, env: deps.env ?? process.env, onError: storeFailed('webhook alerts') }).start(),
    sessions: config.console.enabled ? consoleSessions(deps, config, now, app) : null,
    tracing: deps.tracing ?? null,
  };
  app.addHook('onClose', async () => {
    await ctx.alerts.close();
    ctx.admission.close();
    await ctx.models.close();
  });

  if (ctx.tracing) installRequestSpans(app, ctx.tracing);
  installValidators(app);
  installJsonParser(app, config.server.json_max_depth);
  installErrorHandling(app, config.server.body_limit_bytes);
  installMetricsHooks(app, metrics);
  installSlowReaders(app, config.server, metrics.replies);
  app.addHook('onError', async (_request, _reply, error) => {
    if (error instanceof StoreUnavailableError) health.failed(error);
  });
  installAccessLog(app);
  if (deps.serveMetrics) metricsRoute(app, metrics.registry);

  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    if (speaksAnthropic(request)) reply.header('request-id', request.id);
    ctx.lifecycle.inFlight++;
    // 'close' fires for finished and for aborted responses alike.
    reply.raw.once('close', () => ctx.lifecycle.inFlight--);
    if (ctx.lifecycle.draining && !request.url.startsWith('/livez') && !request.url.startsWith('/readyz')) {
      return done(shuttingDown());
    }
    try {
      refuseRepeatedAuthorization(request.raw.rawHeaders);
    } catch (error) {
      return done(error as Error);
    }
    done();
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'nova-gateway', version: '1' },
      // Either header carries a key (src/auth/presented-key.ts).
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' }, apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' } } },
      security: [{ bearer: [] }, { apiKey: [] }],
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  await app.register(healthRoutes, { ctx });
  await app.register(v1Routes, { ctx });
  if (deps.adminToken) await app.register(adminRoutes, { ctx, adminToken: deps.adminToken });
  if (ctx.sessions) await app.register(consoleRoutes, { ctx, sessions: ctx.sessions, root: deps.consoleRoot ?? builtConsoleRoot() });

  await app.ready();
  return { app, ctx };
}

function consoleSessions(deps: AppDeps, config: GatewayConfig, now: () => number, app: FastifyInstance): ConsoleSessions {
  const { secret, shared } = sessionSecretOf(deps.consoleSecret, deps.adminToken);
  // Info, as the admin API's absence is: one replica needs nothing more, several need the shared secret.
  if (!shared) app.log.info('neither NOVA_CONSOLE_SECRET nor NOVA_ADMIN_TOKEN is set: console sessions hold on this replica only');
  return new ConsoleSessions({ secret, adminToken: deps.adminToken, ttlMs: config.console.session_ttl_seconds * 1000, now });
}

/** dist/console beside the compiled server (dist/src/app.js), or of the checkout when run from source (src/app.ts). */
function builtConsoleRoot(): string {
  const above = fileURLToPath(new URL('..', import.meta.url));
  return basename(above) === 'dist' ? join(above, 'console') : join(above, 'dist', 'console');
}

/** For apps built without a process (tests): the store's health, probed while away, stopped on close. */
function ownStoreHealth(store: Store, app: FastifyInstance): StoreHealth {
  const health = new StoreHealth({ target: store.kind, ping: () => store.ping(), log: app.log });
  health.begin(true);
  app.addHook('onClose', async () => health.close());
  return health;
}

/**
 * The Redis-backed (or in-memory) usage meter; its last flush runs when the app closes, and
 * what it could not write then is reported: those records are lost (docs/limits-and-usage.md, "Usage").
 */
function createUsageMeter(config: GatewayConfig, store: Store, metrics: Metrics, app: FastifyInstance, health: StoreHealth): UsageMeter {
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
      if (!(error instanceof StoreUnavailableError)) return app.log.warn({ err: error }, `${what} failed`);
      metrics.quota.storeErrors.inc({ operation: 'usage_flush' });
      health.failed(error);
    },
    onInvalid: (detail) => app.log.warn(detail, 'usage value refused (counted as 0)'),
  }).start();
  app.addHook('onClose', async () => {
    await meter.close();
    const lost = meter.buffered;
    if (lost > 0) {
      app.log.warn({ usage_records_lost: lost }, `${lost} usage records could not be written to the store and are lost (the store was unreachable at shutdown)`);
    } else {
      app.log.info('usage records all written to the store');
    }
  });
  return meter;
}
