import { afterEach, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/metrics/metrics.js';
import { BufferedUsageMeter } from '../../src/quota/buffered-usage-meter.js';
import { MINUTE_MS, type UsageStore } from '../../src/store/usage-types.js';
import { MemoryUsageStore } from '../../src/store/memory/memory-usage.js';
import { createRedisClient } from '../../src/store/redis/connect.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { freePort, RedisProcess } from '../support/redis-server.js';

describe('buffered usage meter while Redis is away', () => {
  let redis: RedisProcess | undefined;
  let store: RedisStore | undefined;
  afterEach(async () => {
    await store?.close();
    await redis?.stop();
  });

  it('buffers up to its bound (counting what it drops), then writes the buffer when Redis comes', async () => {
    const port = await freePort();
    const client = createRedisClient({ url: `redis://127.0.0.1:${port}`, mode: 'standalone', commandTimeoutMs: 300 });
    client.on('error', () => undefined);
    store = new RedisStore(client, 'meter');
    const metrics = new Metrics({ defaultMetrics: false });
    const errors: string[] = [];
    const meter = new BufferedUsageMeter({
      store: store.usage,
      metrics: metrics.usage,
      retention: { minuteMs: 3_600_000, hourMs: 86_400_000, dedupMs: 86_400_000 },
      maxBuffered: 3,
      flushIntervalMs: 60_000,
      onError: (_error, what) => errors.push(what),
    });
    for (let i = 0; i < 5; i++) meter.record({ projectId: 'proj_meter', requestId: `r${i}`, requests: 1, part: 'request' });
    expect(meter.buffered).toBe(3);
    const started = Date.now();
    await meter.flush();
    expect(Date.now() - started).toBeLessThan(2000);
    expect(meter.buffered).toBe(3);
    expect(errors).toEqual(['usage flush']);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/nova_usage_dropped_records_total 2\b/);
    expect(text).toMatch(/nova_usage_buffered_records 3\b/);
    expect(text).toMatch(/nova_usage_flush_failures_total 1\b/);

    redis = await RedisProcess.start({ port });
    await expect
      .poll(async () => {
        await meter.flush();
        return meter.buffered;
      }, { timeout: 10_000, interval: 200 })
      .toBe(0);
    const now = Date.now();
    const buckets = await store.usage.buckets('proj_meter', 'minute', now - 2 * MINUTE_MS, now + MINUTE_MS);
    expect(buckets.reduce((sum, bucket) => sum + bucket.counts.requests, 0)).toBe(3);
    expect(await metrics.registry.metrics()).toMatch(/nova_usage_flushed_records_total 3\b/);
    await meter.close();
  });
});

describe('buffered usage meter when the store refuses a batch', () => {
  it('writes the batch record by record, so only the refused record is lost (logged and counted)', async () => {
    const memory = new MemoryUsageStore();
    const refusing: UsageStore = {
      apply: async (batch, events, retention) => {
        if (events.some((event) => event.eventId.startsWith('poison'))) throw new Error('ERR value is not an integer or out of range');
        return memory.apply(batch, events, retention);
      },
      buckets: (...args) => memory.buckets(...args),
      storageBytes: (projectId) => memory.storageBytes(projectId),
    };
    const metrics = new Metrics({ defaultMetrics: false });
    const errors: string[] = [];
    const meter = new BufferedUsageMeter({
      store: refusing,
      metrics: metrics.usage,
      retention: { minuteMs: 3_600_000, hourMs: 86_400_000, dedupMs: 86_400_000 },
      maxBuffered: 1000,
      flushIntervalMs: 60_000,
      onError: (_error, what) => errors.push(what),
    });
    for (let i = 0; i < 36; i++) meter.record({ projectId: 'proj_iso', requestId: `r${i}`, promptTokens: 3 });
    meter.record({ projectId: 'proj_iso', requestId: 'poison', promptTokens: 1000 });
    await meter.close();
    const now = Date.now();
    const buckets = await memory.buckets('proj_iso', 'minute', now - 2 * MINUTE_MS, now + MINUTE_MS);
    expect(buckets.reduce((sum, bucket) => sum + bucket.counts.promptTokens, 0)).toBe(36 * 3);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/nova_usage_dropped_records_total 1\b/);
    expect(text).toMatch(/nova_usage_flushed_records_total 36\b/);
    expect(errors.some((what) => what.includes('poison:usage'))).toBe(true);
    expect(meter.buffered).toBe(0);
  });
});
