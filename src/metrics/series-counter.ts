import { SeriesMetric, type SeriesMetricOptions } from './series-metric.js';

/** prom-client's checks, in its order (a NaN passes its first one too). */
function checked(value: number): void {
  if (value && !Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
  if (value < 0) throw new Error('It is not possible to decrease a counter');
}

interface CounterSeries {
  labels: Record<string, string>;
  value: number;
}

/** A labelled counter for the request path (see SeriesMetric), exported as prom-client's Counter. */
export class SeriesCounter<T extends string> extends SeriesMetric<T, CounterSeries> {
  readonly type = 'counter';

  constructor(options: SeriesMetricOptions<T>) {
    super(options);
    this.startAtZero();
  }

  override reset(): void {
    super.reset();
    this.startAtZero();
  }

  inc(labels: Record<T, string>, value = 1): void {
    checked(value);
    this.seriesOf(labels).value += value;
  }

  /** `inc` by label values, in the order of the label names. */
  incAt(values: readonly string[], value = 1): void {
    checked(value);
    this.seriesAt(values).value += value;
  }

  async get() {
    const values = [];
    for (const { labels, value } of this.series) values.push({ value, labels });
    return { help: this.help, name: this.name, type: this.type, values, aggregator: this.aggregator };
  }

  /** Without labels, the one series is exported from the start, at 0, as prom-client does. */
  private startAtZero(): void {
    if (this.labelled) return;
    this.seriesOf({} as Record<T, string>);
  }

  protected newSeries(labels: Record<string, string>): CounterSeries {
    return { labels, value: 0 };
  }
}
