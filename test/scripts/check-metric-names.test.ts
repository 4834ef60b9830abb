import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { exportedSeries, metricNamesIn } from '../../scripts/check-metric-names.js';

describe('metric names in PromQL', () => {
  it('finds metric names, not functions, keywords, labels, durations or Grafana variables', () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (le, gen_ai_request_model) (rate(nova_time_to_first_byte_seconds_bucket{namespace=~"$namespace", job="x"}[$__rate_interval])))',
      ),
    ).toEqual(['nova_time_to_first_byte_seconds_bucket']);
    expect(metricNamesIn('(sum(up{job="a"}) or vector(0)) < 3 and max by (pod) (deriv(nova_usage_buffered_records[10m])) > 1e3')).toEqual([
      'up',
      'nova_usage_buffered_records',
    ]);
    expect(metricNamesIn('sum(rate(a_total[5m] offset 1h)) / sum(rate(b_total[5m]))')).toEqual(['a_total', 'b_total']);
  });
});

describe("the chart's Grafana dashboard", () => {
  it('uses only series the gateway exports', async () => {
    const dashboard = JSON.parse(readFileSync('helm/nova-gateway/dashboards/nova-gateway.json', 'utf8'));
    const exprs: string[] = dashboard.panels.flatMap((panel: { targets?: { expr: string }[] }) => (panel.targets ?? []).map((t) => t.expr));
    const exported = await exportedSeries();
    const used = new Set(exprs.flatMap(metricNamesIn));
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((name) => !exported.has(name))).toEqual([]);
    // A renamed metric is caught.
    expect(exported.has(metricNamesIn('rate(nova_usage_tokenz_total[5m])')[0]!)).toBe(false);
  });
});
