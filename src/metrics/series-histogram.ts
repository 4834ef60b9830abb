import type { Registry } from 'prom-client';

interface Series {
  labels: Record<string, string>;
  /** Observations per bucket (not cumulative); the last slot is above the highest bound (+Inf). */
  counts: Float64Array;
  sum: number;
  count: number;
}

interface ExportedValue {
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string>;
  value: number;
  metricName: string;
  /** prom-client's own bucket values carry `exemplar: null` (exemplars are off). */
  exemplar?: null;
}

export interface SeriesHistogramOptions<T extends string> {
  name: string;
  help: string;
  labelNames: readonly T[];
  buckets: readonly number[];
  registers: Registry[];
}

/**
 * A histogram for the request path, exported exactly as prom-client's own (same text, same JSON),
 * registered in a prom-client Registry. An observation finds its series in a Map by its label
 * values and counts into an array: prom-client validates the label names, hashes the labels and
 * allocates a closure on every call, about a microsecond each, and a chat request makes six.
 * Label names are checked once, when a series is first seen.
 */
export class SeriesHistogram<T extends string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly labelNames: readonly T[];
  private readonly bounds: readonly number[];
  private series = new Map<string, Series>();

  constructor(options: SeriesHistogramOptions<T>) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    this.bounds = [...options.buckets].sort((a, b) => a - b);
    for (const registry of options.registers) registry.registerMetric(this as never);
  }

  observe(labels: Record<T, string>, value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    let key = '';
    for (const name of this.labelNames) key += `${labels[name]}\u0000`;
    let series = this.series.get(key);
    if (series === undefined) {
      series = this.newSeries(labels);
      this.series.set(key, series);
    }
    const { bounds } = this;
    let slot = 0;
    while (slot < bounds.length && value > bounds[slot]!) slot++;
    series.counts[slot]! += 1;
    series.sum += value;
    series.count += 1;
  }

  reset(): void {
    this.series = new Map();
  }

  /** For the text exposition (prom-client's registry prefers it to get()). */
  async getForPromString() {
    const values: ExportedValue[] = [];
    for (const series of this.series.values()) {
      let cumulative = 0;
      this.bounds.forEach((bound, slot) => {
        cumulative += series.counts[slot]!;
        values.push({ labels: { le: bound }, sharedLabels: series.labels, value: cumulative, metricName: `${this.name}_bucket`, exemplar: null });
      });
      values.push(
        { labels: { le: '+Inf' }, sharedLabels: series.labels, value: series.count, metricName: `${this.name}_bucket`, exemplar: null },
        { labels: {}, sharedLabels: series.labels, value: series.sum, metricName: `${this.name}_sum` },
        { labels: {}, sharedLabels: series.labels, value: series.count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** For JSON (getMetricsAsJSON): each value's labels with the series' labels merged in. */
  async get() {
    const data = await this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ sharedLabels, ...value }) => ({ ...value, labels: { ...value.labels, ...sharedLabels } })),
    };
  }

  private newSeries(labels: Record<T, string>): Series {
    const own: Record<string, string> = {};
    for (const name of Object.keys(labels)) {
      if (!this.labelNames.includes(name as T)) throw new Error(`Added label "${name}" is not included in initial labelset: ${JSON.stringify(this.labelNames)}`);
    }
    // In the caller's order, as prom-client keeps them (the order of the exported labels).
    for (const name of Object.keys(labels) as T[]) if (labels[name] !== undefined) own[name] = labels[name];
    return { labels: own, counts: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
  }
}
