import { Counter } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SeriesCounter } from '../../src/metrics/series-counter.js';
import { metricPair } from '../support/metric-pair.js';

type Label = 'model' | 'type';

function pair(labelNames: Label[]) {
  const options = { name: 'demo_total', help: 'A demo "counter"\\nwith escapes.', labelNames };
  return metricPair(
    (registers) => new SeriesCounter<Label>({ ...options, registers }),
    (registers) => new Counter<Label>({ ...options, registers }),
  );
}

describe('SeriesCounter', () => {
  it("exports exactly what prom-client's Counter exports for the same increments (text and JSON)", async () => {
    const { ours, theirs, fast, reference } = pair(['model', 'type']);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    const models = ['m-1', 'm "2"', 'm\\3'];
    for (let i = 0; i < 2_000; i++) {
      // Label objects in either key order; whole, fractional, zero and default increments.
      const labels = i % 2 === 0 ? { model: models[i % 3]!, type: String(i % 5) } : { type: String(i % 5), model: models[i % 3]! };
      const value = i % 7 === 0 ? undefined : i % 11 === 0 ? 0 : i % 3 === 0 ? 0.25 * i : i;
      fast.inc(labels, value);
      reference.inc(labels, value);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
    fast.reset();
    reference.reset();
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('counts by label values (incAt) into the series inc finds, exported as prom-client exports them', async () => {
    const { ours, theirs, fast, reference } = pair(['model', 'type']);
    for (let i = 0; i < 500; i++) {
      const model = `m-${i % 4}`;
      const type = i % 3 === 0 ? 'prompt' : 'completion';
      // Both ways into one counter: the same series whichever call saw a label pair first.
      if (i % 2 === 0) fast.incAt([model, type], i);
      else fast.inc({ model, type }, i);
      reference.inc({ model, type }, i);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(() => fast.incAt(['only-one'], 1)).toThrow(/label values/);
    expect(() => fast.incAt(['m', 't'], -1)).toThrow(/decrease/);
  });

  it('without labels, exports its one series from the start at 0, as prom-client does', async () => {
    const { ours, theirs, fast, reference } = pair([]);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.metrics()).toContain('demo_total 0');
    fast.inc({} as never, 3);
    reference.inc({}, 3);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    fast.reset();
    reference.reset();
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('refuses a label it was not given, a negative increment and a value that is not a number, as prom-client does', () => {
    const { fast, reference } = pair(['model', 'type']);
    for (const counter of [fast, reference]) {
      expect(() => counter.inc({ model: 'm', type: 't', extra: 'x' } as never, 1)).toThrow(/extra/);
      expect(() => counter.inc({ model: 'm', type: 't' }, -1)).toThrow(/decrease/);
      expect(() => counter.inc({ model: 'm', type: 't' }, Number.POSITIVE_INFINITY)).toThrow(TypeError);
    }
  });
});
