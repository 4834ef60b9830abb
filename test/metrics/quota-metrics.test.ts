import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { QuotaMetrics } from '../../src/metrics/quota-metrics.js';

describe('QuotaMetrics in flight', () => {
  it('reports each project while it has requests in flight, then 0, and keeps reporting after it returns', async () => {
    const registry = new Registry();
    const metrics = new QuotaMetrics(registry, true);
    const scrape = async () => {
      const text = await registry.metrics();
      return Object.fromEntries([...text.matchAll(/^nova_quota_requests_in_flight\{project_id="([^"]+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]));
    };
    metrics.requestInFlight('proj_a', true);
    metrics.requestInFlight('proj_a', true);
    metrics.requestInFlight('proj_b', true);
    expect(await scrape()).toEqual({ proj_a: 2, proj_b: 1 });
    metrics.requestInFlight('proj_a', false);
    metrics.requestInFlight('proj_a', false);
    metrics.requestInFlight('proj_b', false);
    expect(await scrape()).toEqual({ proj_a: 0, proj_b: 0 });
    // Still 0 once forgotten, and counted again when a request starts.
    expect(await scrape()).toEqual({ proj_a: 0, proj_b: 0 });
    metrics.requestInFlight('proj_b', true);
    expect(await scrape()).toEqual({ proj_a: 0, proj_b: 1 });
  });
});
