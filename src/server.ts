import { setTimeout as sleep } from 'node:timers/promises';
import { buildApp } from './app.js';
import { readProcessSettings } from './config/env.js';
import { ConfigError, loadConfigFile } from './config/load-config.js';
import { createLogger, flushLogger } from './logger.js';
import { Metrics } from './metrics/metrics.js';
import { startMetricsServer } from './metrics/metrics-endpoint.js';
import { createStore } from './store/create-store.js';

async function main(): Promise<void> {
  const settings = readProcessSettings();
  const logger = createLogger(settings.logLevel);
  const config = await loadConfigFile(settings.configPath);
  if (settings.drainTimeoutMs !== undefined) config.server.drain_timeout_ms = settings.drainTimeoutMs;

  const { store, connected } = await createStore({
    redisUrl: settings.redisUrl,
    redisMode: settings.redisMode,
    commandTimeoutMs: config.redis.command_timeout_ms,
    keyPrefix: config.redis.key_prefix,
  });
  if (store.kind === 'memory') {
    logger.warn('REDIS_URL is not set: using the in-memory store (one process only, data is lost on restart)');
  } else if (!connected) {
    logger.warn('Redis is not reachable yet: serving not-ready until it is');
  }

  const metrics = new Metrics({ projectLabel: config.metrics.project_label });
  const serveMetrics = settings.metricsPort === 0;
  const { app, ctx } = await buildApp({ config, store, logger, adminToken: settings.adminToken, metrics, serveMetrics });
  if (!settings.adminToken) logger.info('NOVA_ADMIN_TOKEN is not set: the admin API is disabled');

  await app.listen({ host: settings.host, port: settings.port });
  const metricsServer = serveMetrics ? undefined : await startMetricsServer(metrics.registry, settings.host, settings.metricsPort);
  logger.info({ models: config.models.map((model) => model.id), store: store.kind }, 'nova-gateway ready');

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
    metricsServer?.close();
    await store.close();
    logger.info('stopped');
    await flushLogger(logger);
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  const message = error instanceof ConfigError ? error.message : (error as Error).stack ?? String(error);
  console.error(`nova-gateway failed to start: ${message}`);
  process.exit(1);
});
