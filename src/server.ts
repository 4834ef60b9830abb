import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { buildApp } from './app.js';
import { readProcessSettings } from './config/env.js';
import { ConfigError, loadConfigFile } from './config/load-config.js';
import { createLogger, flushLogger, logDestination } from './core/logger.js';
import { Metrics } from './metrics/metrics.js';
import { startMetricsServer } from './metrics/metrics-endpoint.js';
import { createStore } from './store/create-store.js';
import type { Tracing } from './tracing/tracing.js';
import { tracingSettingsOf, TracingSettingsError } from './tracing/tracing-settings.js';

/** A listener that could not open: one line naming the port and the variable that sets it. */
class ListenError extends Error {}

async function listening<T>(what: string, variable: string, host: string, port: number, open: () => Promise<T>): Promise<T> {
  try {
    return await open();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const where = `${host}:${port}`;
    if (code === 'EADDRINUSE') throw new ListenError(`${what} port ${where} is already in use (${variable}); stop what holds it or choose another port`);
    if (code === 'EACCES') throw new ListenError(`${what} port ${where} needs privileges this process lacks (${variable}); use a port above 1023`);
    if (code === 'EADDRNOTAVAIL') throw new ListenError(`${what} address ${host} is not an address of this machine (HOST)`);
    throw error;
  }
}

/** The package's version (the spans' service.version): the nearest package.json above this file, wherever it was built. */
async function packageVersion(): Promise<string> {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    const text = await readFile(join(dir, 'package.json'), 'utf8').catch(() => null);
    if (text !== null) return String((JSON.parse(text) as { version?: unknown }).version ?? 'unknown');
  }
  return 'unknown';
}

/** Traces when the OTEL_* variables ask for them (docs/tracing.md); the SDK is loaded only then. */
async function startTracingIfAsked(logger: Logger): Promise<Tracing | null> {
  const settings = tracingSettingsOf(process.env);
  if (!settings) return null;
  const { startTracing } = await import('./tracing/otel-tracing.js');
  const tracing = await startTracing(settings, await packageVersion(), (message, error) => logger.warn({ err: error }, message));
  logger.info({ protocol: settings.protocol, sampler: settings.sampler.name }, 'tracing on: spans exported over OTLP');
  return tracing;
}

async function main(): Promise<void> {
  const settings = readProcessSettings();
  const config = await loadConfigFile(settings.configPath);
  const metrics = new Metrics({ projectLabel: config.metrics.project_label });
  const logger = createLogger(settings.logLevel, logDestination((lines) => metrics.logLinesDropped.inc(lines)));
  if (settings.drainTimeoutMs !== undefined) config.server.drain_timeout_ms = settings.drainTimeoutMs;

  const { store, health } = await createStore(
    {
      redisUrl: settings.redisUrl,
      redisMode: settings.redisMode,
      redisSentinelMaster: settings.redisSentinelMaster,
      redisSentinelPassword: settings.redisSentinelPassword,
      commandTimeoutMs: config.redis.command_timeout_ms,
      keyPrefix: config.redis.key_prefix,
    },
    logger,
  );
  if (store.kind === 'memory') {
    logger.warn('REDIS_URL is not set: using the in-memory store (one process only, data is lost on restart)');
  }

  const tracing = await startTracingIfAsked(logger);
  const serveMetrics = settings.metricsPort === 0;
  const { app, ctx } = await buildApp({ config, store, logger, adminToken: settings.adminToken, consoleSecret: settings.consoleSecret, tracing, metrics, serveMetrics, storeHealth: health });
  if (!settings.adminToken) logger.info('NOVA_ADMIN_TOKEN is not set: the admin API is disabled');

  const { host, port, metricsPort } = settings;
  await listening('HTTP', 'PORT', host, port, () => app.listen({ host, port }));
  const metricsServer = serveMetrics
    ? undefined
    : await listening('metrics', 'METRICS_PORT', host, metricsPort, () => startMetricsServer(metrics.registry, host, metricsPort));
  if (!serveMetrics) logger.info({ metrics_port: metricsPort }, `metrics at http://${host}:${metricsPort}/metrics`);
  // "ready" means what /readyz means: listening and the store reachable.
  const announceReady = () => logger.info({ models: config.models.map((model) => model.id), store: store.kind }, 'nova-gateway ready');
  if (health.reachable) announceReady();
  else health.once('up', announceReady);

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, in_flight: ctx.lifecycle.inFlight }, 'draining');
    ctx.lifecycle.draining = true;
    const deadline = Date.now() + config.server.drain_timeout_ms;
    while (ctx.lifecycle.inFlight > 0 && Date.now() < deadline) await sleep(50);
    if (ctx.lifecycle.inFlight > 0) logger.warn({ in_flight: ctx.lifecycle.inFlight }, 'drain timeout reached; closing anyway');
    await app.close();
    // The last spans (the drained requests') are exported before the process ends.
    await tracing?.shutdown().catch((error: unknown) => logger.warn({ err: error }, 'trace export at shutdown failed'));
    metricsServer?.close();
    health.close();
    await store.close();
    logger.info('stopped');
    await flushLogger(logger);
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  const oneLine = error instanceof ConfigError || error instanceof ListenError || error instanceof TracingSettingsError;
  const message = oneLine ? (error as Error).message : (error as Error).stack ?? String(error);
  console.error(`nova-gateway failed to start: ${message}`);
  process.exit(1);
});
