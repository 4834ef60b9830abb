import { SeriesMetric, type SeriesMetricOptions } from './series-metric.js';

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

export interface SeriesHistogramOptions<T extends string> extends SeriesMetricOptions<T> {
  buckets: readonly number[];
}

/** A labelled histogram for the request path (see SeriesMetric), exported as prom-client's Histogram. */
export class SeriesHistogram<T extends string> extends SeriesMetric<T, Series> {
  readonly type = 'histogram';
  private readonly bounds: readonly number[];

  constructor(options: SeriesHistogramOptions<T>) {
    super(options);
    this.bounds = [...options.buckets].sort((a, b) => a - b);
  }

  observe(labels: Record<T, string>, value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const series = this.seriesOf(labels);
    const { bounds } = this;
    let slot = 0;
    while (slot < bounds.length && value > bounds[slot]!) slot++;
    series.counts[slot]! += 1;
    series.sum += value;
    series.count += 1;
  }

  /** For the text exposition (prom-client's registry prefers it to get()). */
  async getForPromString() {
    const values: ExportedValue[] = [];
    for (const series of this.series) {
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

  protected newSeries(labels: Record<string, string>): Series {
    return { labels, counts: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
  }
}
