import type { Registry } from 'prom-client';

export interface SeriesMetricOptions<T extends string> {
  name: string;
  help: string;
  labelNames: readonly T[];
  registers: Registry[];
}

/**
 * A metric for the request path, registered in a prom-client Registry and exported exactly as
 * prom-client's own (same text, same JSON). A recording finds its series in a Map by its label
 * values: prom-client validates the label names and hashes the labels on every call, about a
 * microsecond each, and a chat request records more than a dozen. Label names are checked once,
 * when a series is first seen.
 */
export abstract class SeriesMetric<T extends string, S extends { labels: Record<string, string> }> {
  abstract readonly type: 'counter' | 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly labelNames: readonly T[];
  protected series = new Map<string, S>();

  constructor(options: SeriesMetricOptions<T>) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    for (const registry of options.registers) registry.registerMetric(this as never);
  }

  protected get labelled(): boolean {
    return this.labelNames.length > 0;
  }

  reset(): void {
    this.series = new Map();
  }

  protected seriesOf(labels: Record<T, string>): S {
    let key = '';
    for (const name of this.labelNames) key += `${labels[name]}\u0000`;
    let series = this.series.get(key);
    if (series === undefined) {
      series = this.newSeries(this.ownLabels(labels));
      this.series.set(key, series);
    }
    return series;
  }

  protected abstract newSeries(labels: Record<string, string>): S;

  private ownLabels(labels: Record<T, string>): Record<string, string> {
    for (const name of Object.keys(labels)) {
      if (!this.labelNames.includes(name as T)) throw new Error(`Added label "${name}" is not included in initial labelset: ${JSON.stringify(this.labelNames)}`);
    }
    // In the caller's order, as prom-client keeps them (the order of the exported labels).
    const own: Record<string, string> = {};
    for (const name of Object.keys(labels) as T[]) if (labels[name] !== undefined) own[name] = labels[name];
    return own;
  }
}
