import type { FastifyInstance } from 'fastify';
import { Counter, Histogram, type Registry } from 'prom-client';

const LABELS = ['method', 'route', 'status_code'] as const;

/** Every response, by route template (never the raw URL: ids would explode the series). */
export class HttpMetrics {
  readonly requests: Counter<(typeof LABELS)[number]>;
  readonly duration: Histogram<(typeof LABELS)[number]>;

  constructor(registry: Registry) {
    this.requests = new Counter({
      name: 'nova_http_requests_total',
      help: 'HTTP requests answered, by method, route template and status code.',
      labelNames: LABELS,
      registers: [registry],
    });
    this.duration = new Histogram({
      name: 'nova_http_request_duration_seconds',
      help: 'Time from request received to response sent, by method, route template and status code.',
      labelNames: LABELS,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers: [registry],
    });
  }

  /** Registers the onResponse hook that observes every response of the app. */
  install(app: FastifyInstance): void {
    app.addHook('onResponse', (request, reply, done) => {
      const labels = {
        method: request.method,
        route: request.routeOptions.url ?? 'unmatched',
        status_code: String(reply.statusCode),
      };
      this.requests.inc(labels);
      this.duration.observe(labels, reply.elapsedTime / 1000);
      done();
    });
  }
}
