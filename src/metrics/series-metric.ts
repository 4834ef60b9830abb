import type { Registry } from 'prom-client';

export interface SeriesMetricOptions<T extends string> {
  name: string;
  help: string;
  labelNames: readonly T[];
  registers: Registry[];
}

/**
 * A metric for the request path, registered in a prom-client Registry and exported exactly as
 * prom-client's own (same text, same JSON). A recording finds its series through one Map per
 * label, keyed by the label's value (strings keep their hash, so nothing is built or hashed per
 * call): prom-client validates the label names and hashes the labels on every call, about a
 * microsecond each, and a chat request records more than a dozen. Label names are checked once,
 * when a series is first seen.
 */
export abstract class SeriesMetric<T extends string, S extends { labels: Record<string, string> }> {
  abstract readonly type: 'counter' | 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly labelNames: readonly T[];
  /** The series in the order they were first seen (prom-client's export order). */
  protected series: S[] = [];
  /** Maps nested one level per label name; the last level holds the series. */
  private byValue = new Map<unknown, unknown>();
  private readonly scratch: (string | undefined)[];

  constructor(options: SeriesMetricOptions<T>) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    this.scratch = new Array<string | undefined>(options.labelNames.length);
    for (const registry of options.registers) registry.registerMetric(this as never);
  }

  protected get labelled(): boolean {
    return this.labelNames.length > 0;
  }

  reset(): void {
    this.series = [];
    this.byValue = new Map();
  }

  protected seriesOf(labels: Record<T, string>): S {
    // The values in label-name order, in a reused array: recording allocates nothing.
    const values = this.scratch;
    for (let i = 0; i < values.length; i++) values[i] = labels[this.labelNames[i]!];
    return this.seriesAt(values, labels);
  }

  /**
   * The series of these label values, in the order of the label names (callers that know them
   * build no labels object per call). A new series takes `labels` (checked, in the caller's
   * order, as prom-client keeps them) or, without it, the names with these values.
   */
  protected seriesAt(values: readonly (string | undefined)[], labels?: Record<T, string>): S {
    const names = this.labelNames;
    if (values.length !== names.length) throw new Error(`${this.name}: ${values.length} label values for ${names.length} labels`);
    let level = this.byValue;
    // No labels: the one series sits under the key undefined.
    const last = names.length - 1;
    for (let i = 0; i < last; i++) {
      let next = level.get(values[i]) as Map<unknown, unknown> | undefined;
      if (next === undefined) {
        next = new Map();
        level.set(values[i], next);
      }
      level = next;
    }
    const value = last < 0 ? undefined : values[last];
    let series = level.get(value) as S | undefined;
    if (series === undefined) {
      series = this.newSeries(labels ? this.ownLabels(labels) : Object.fromEntries(names.map((name, i) => [name, values[i]!])));
      level.set(value, series);
      this.series.push(series);
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
