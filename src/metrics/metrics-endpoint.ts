import { createServer, type Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { StoreUnavailableError } from '../store/types.js';
import type { Metrics } from './metrics.js';

/** The app-wide hooks of the instrument groups: HTTP traffic and store failures of requests. */
export function installMetricsHooks(app: FastifyInstance, metrics: Metrics): void {
  metrics.http.install(app);
  app.addHook('onError', async (_request, _reply, error) => {
    if (error instanceof StoreUnavailableError) metrics.quota.storeErrors.inc({ operation: 'request' });
  });
}

/** `/metrics` on the main app (METRICS_PORT=0). */
export function metricsRoute(app: FastifyInstance, registry: Registry): void {
  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.header('content-type', registry.contentType);
    return registry.metrics();
  });
}

/** `/metrics` on its own listener (METRICS_PORT), apart from client traffic. */
export async function startMetricsServer(registry: Registry, host: string, port: number): Promise<Server> {
  const server = createServer((request, response) => {
    if (request.method !== 'GET' || request.url?.split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    registry.metrics().then(
      (text) => response.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => response.writeHead(500, { 'content-type': 'text/plain' }).end('metrics collection failed\n'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
