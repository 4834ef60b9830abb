import { collectDefaultMetrics, Counter, Registry } from 'prom-client';
import { AuthMetrics } from './auth-metrics.js';
import { ConnectionMetrics } from './connection-metrics.js';
import { HttpMetrics } from './http-metrics.js';
import { QuotaMetrics } from './quota-metrics.js';
import { UsageMetrics } from './usage-metrics.js';
import { ModelTrafficMetrics } from './model-traffic-metrics.js';
import { StoreMetrics } from './store-metrics.js';
import { ReplyMetrics } from './reply-metrics.js';

/** The process's Prometheus registry; instrument groups register on it. */
export class Metrics {
  readonly registry = new Registry();
  readonly http: HttpMetrics;
  readonly auth: AuthMetrics;
  readonly quota: QuotaMetrics;
  readonly usage: UsageMetrics;
  readonly modelTraffic: ModelTrafficMetrics;
  readonly store: StoreMetrics;
  readonly connections: ConnectionMetrics;
  readonly replies: ReplyMetrics;
  readonly logLinesDropped: Counter;

  /** `projectLabel: false` (config metrics.project_label) drops the per-project label everywhere. */
  constructor(options: { defaultMetrics?: boolean; projectLabel?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    const projectLabel = options.projectLabel ?? true;
    this.http = new HttpMetrics(this.registry);
    this.auth = new AuthMetrics(this.registry);
    this.quota = new QuotaMetrics(this.registry, projectLabel);
    this.usage = new UsageMetrics(this.registry, projectLabel);
    this.modelTraffic = new ModelTrafficMetrics(this.registry);
    this.store = new StoreMetrics(this.registry);
    this.connections = new ConnectionMetrics(this.registry);
    this.replies = new ReplyMetrics(this.registry);
    this.logLinesDropped = new Counter({
      name: 'nova_log_lines_dropped_total',
      help: 'Log lines dropped because the log reader (stdout) fell more than 16 MiB behind or the pipe broke',
      registers: [this.registry],
    });
  }
}
