import { Histogram } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SeriesHistogram } from '../../src/metrics/series-histogram.js';
import { metricPair } from '../support/metric-pair.js';

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];
type Label = 'model' | 'outcome';

function pair() {
  const options = { name: 'demo_seconds', help: 'A demo "histogram"\\nwith escapes.', labelNames: ['model', 'outcome'] as Label[], buckets: BUCKETS };
  return metricPair(
    (registers) => new SeriesHistogram<Label>({ ...options, registers }),
    (registers) => new Histogram<Label>({ ...options, registers }),
  );
}

describe('SeriesHistogram', () => {
  it("exports exactly what prom-client's Histogram exports for the same observations (text and JSON)", async () => {
    const { ours, theirs, fast, reference } = pair();
    let seed = 11;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const models = ['m-1', 'm "2"', 'm\\3'];
    for (let i = 0; i < 2_000; i++) {
      // Values on the bounds, between them, above the last one and zero.
      const value = i % 7 === 0 ? BUCKETS[i % BUCKETS.length]! : i % 11 === 0 ? 42 : i % 13 === 0 ? 0 : random() * 2;
      // Label objects in either key order.
      const labels = i % 2 === 0 ? { model: models[i % 3]!, outcome: String(200 + (i % 2)) } : { outcome: String(200 + (i % 2)), model: models[i % 3]! };
      fast.observe(labels, value);
      reference.observe(labels, value);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
    fast.reset();
    reference.reset();
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('refuses a label it was not given and a value that is not a finite number, as prom-client does', () => {
    const { fast, reference } = pair();
    expect(() => fast.observe({ model: 'm', outcome: '200', extra: 'x' } as never, 1)).toThrow(/extra/);
    expect(() => reference.observe({ model: 'm', outcome: '200', extra: 'x' } as never, 1)).toThrow(/extra/);
    expect(() => fast.observe({ model: 'm', outcome: '200' }, Number.NaN)).toThrow(TypeError);
    expect(() => reference.observe({ model: 'm', outcome: '200' }, Number.NaN)).toThrow(TypeError);
  });
});
