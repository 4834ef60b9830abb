import { collectDefaultMetrics, Registry } from 'prom-client';

/** The process's Prometheus registry; instrument groups register on it. */
export class Metrics {
  readonly registry = new Registry();

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }
}
