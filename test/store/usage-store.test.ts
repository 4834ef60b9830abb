import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { BufferedUsageMeter } from '../../src/quota/buffered-usage-meter.js';
import { costOf } from '../../src/core/pricing.js';
import { readUsage } from '../../src/routes/management/usage-query.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/connect.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { Store } from '../../src/store/types.js';
import { emptyCounts, HOUR_MS, MINUTE_MS, type UsageStore } from '../../src/store/usage-types.js';
import { createQuotaStore, QUOTA_STORE_KINDS, type QuotaStoreKind } from '../support/quota-stores.js';
import { RedisCluster } from '../support/redis-cluster.js';
import type { UsageAnswer, UsageGroupRow } from '../support/usage-answer.js';

const RETENTION = { minuteMs: 48 * HOUR_MS, hourMs: 400 * 24 * HOUR_MS, dedupMs: 86_400_000 };
const WIDEST = { startTime: '0001-01-01T00:00:00Z', endTime: '9999-12-31T23:59:59Z' };

function meterOn(store: UsageStore, metrics = new Metrics({ defaultMetrics: false }), errors: string[] = []) {
  return new BufferedUsageMeter({ store, metrics: metrics.usage, retention: RETENTION, maxBuffered: 100_000, flushIntervalMs: 60_000, onError: (_e, what) => errors.push(what) });
}

const read = (store: UsageStore, projectId: string, query: Parameters<typeof readUsage>[2]) =>
  readUsage(store, projectId, query, Date.now(), RETENTION) as unknown as Promise<UsageAnswer>;

describe.each(QUOTA_STORE_KINDS)('usage store (%s)', (kind: QuotaStoreKind) => {
  let cluster: RedisCluster | undefined;
  let store: Store;
  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
    store = await createQuotaStore(kind, cluster);
  });
  afterAll(async () => {
    await store?.close();
    await cluster?.stop();
  });

  it('sums cost exactly, and group_by model and api_key each add up to the ungrouped totals', async () => {
    const projectId = `proj_${randomBase62(12)}`;
    const meter = meterOn(store.usage);
    const pricing = [
      { inputPerMillion: 2.5, outputPerMillion: 10 },
      { inputPerMillion: 0.15, outputPerMillion: 0.6 },
      { inputPerMillion: 3.333333333, outputPerMillion: 17.77 },
    ];
    const models = ['gpt-a', 'gpt-b', 'claude/c'];
    const keys = ['key_one', 'key_two'];
    let expectedCost = 0;
    let expectedPrompt = 0;
    for (let i = 0; i < 600; i++) {
      const requestId = `req_${i}`;
      meter.record({ projectId, requestId, apiKeyId: keys[i % 2], requests: 1, part: 'request' });
      if (i % 10 === 9) continue; // a request that never reached a model (a management route)
      const promptTokens = 1 + ((i * 7919) % 4000);
      const completionTokens = (i * 104_729) % 1500;
      const cost = costOf(pricing[i % 3], { prompt_tokens: promptTokens, completion_tokens: completionTokens });
      expectedCost += (promptTokens * pricing[i % 3]!.inputPerMillion + completionTokens * pricing[i % 3]!.outputPerMillion) / 1e6;
      expectedPrompt += promptTokens;
      meter.record({ projectId, requestId, model: models[i % 3], promptTokens, completionTokens, cost });
    }
    await meter.close();

    const total = await read(store.usage, projectId, {});
    expect(total.requests).toBe(600);
    expect(total.tokens.prompt).toBe(expectedPrompt);
    expect(Math.abs(total.cost - expectedCost) / expectedCost).toBeLessThan(1e-9);

    for (const groupBy of ['model', 'api_key'] as const) {
      const grouped = await read(store.usage, projectId, { groupBy, bucketWidth: '1m' });
      const groups = grouped.groups!;
      const sum = (pick: (row: UsageGroupRow) => number) => groups.reduce((acc, row) => acc + pick(row), 0);
      expect(sum((row) => row.requests)).toBe(total.requests);
      expect(sum((row) => row.tokens.prompt)).toBe(total.tokens.prompt);
      expect(sum((row) => row.tokens.completion)).toBe(total.tokens.completion);
      expect(Math.abs(sum((row) => row.cost) - total.cost) / total.cost).toBeLessThan(1e-12);
      // Every plotted bucket's groups add up to the bucket.
      for (const bucket of grouped.buckets!) {
        expect(bucket.groups!.reduce((acc, row) => acc + row.requests, 0)).toBe(bucket.requests);
      }
      if (groupBy === 'model') {
        expect(groups.map((row) => row.model)).toEqual(['claude/c', 'gpt-a', 'gpt-b', null]);
        expect(groups.find((row) => row.model === null)!.requests).toBe(60);
        expect(groups.find((row) => row.model === 'gpt-a')!.requests).toBe(180);
      } else {
        expect(groups.map((row) => [row.api_key, row.requests])).toEqual([['key_one', 300], ['key_two', 300]]);
      }
    }
  });

  it('sums cached, cache-write and reasoning tokens in the totals, every group and every bucket, and costs them at their prices', async () => {
    const projectId = `proj_${randomBase62(12)}`;
    const meter = meterOn(store.usage);
    const pricing = { inputPerMillion: 3, outputPerMillion: 15, cachedInputPerMillion: 0.3, cacheWritePerMillion: 3.75 };
    const models = ['claude-a', 'gpt-b'];
    const expected = { prompt: 0, completion: 0, cached: 0, written: 0, reasoning: 0, cost: 0 };
    for (let i = 0; i < 40; i++) {
      const requestId = `req_${i}`;
      meter.record({ projectId, requestId, apiKeyId: `key_${i % 2}`, requests: 1, part: 'request' });
      const usage = { prompt_tokens: 1000 + i, completion_tokens: 200 + i, cached_prompt_tokens: 10 * i, cache_write_tokens: i % 4 === 0 ? 500 : 0, reasoning_tokens: 3 * i };
      const cost = costOf(pricing, usage);
      expected.prompt += usage.prompt_tokens;
      expected.completion += usage.completion_tokens;
      expected.cached += usage.cached_prompt_tokens;
      expected.written += usage.cache_write_tokens;
      expected.reasoning += usage.reasoning_tokens;
      expected.cost += cost;
      meter.record({
        projectId,
        requestId,
        model: models[i % 2],
        promptTokens: usage.prompt_tokens,
        completionTokens: usage.completion_tokens,
        cachedPromptTokens: usage.cached_prompt_tokens,
        cacheWriteTokens: usage.cache_write_tokens,
        reasoningTokens: usage.reasoning_tokens,
        cost,
      });
    }
    await meter.close();
    const total = await read(store.usage, projectId, {});
    expect(total.tokens).toEqual({
      prompt: expected.prompt,
      completion: expected.completion,
      total: expected.prompt + expected.completion,
      cached_prompt: expected.cached,
      cache_write: expected.written,
      reasoning: expected.reasoning,
    });
    expect(total.cost).toBeCloseTo(expected.cost, 12);
    for (const groupBy of ['model', 'api_key'] as const) {
      const grouped = await read(store.usage, projectId, { groupBy, bucketWidth: '1m' });
      for (const field of ['cached_prompt', 'cache_write', 'reasoning'] as const) {
        expect(grouped.groups!.reduce((sum, row) => sum + row.tokens[field], 0)).toBe(total.tokens[field]);
        expect(grouped.buckets!.reduce((sum, bucket) => sum + bucket.tokens[field], 0)).toBe(total.tokens[field]);
        for (const bucket of grouped.buckets!) expect(bucket.groups!.reduce((sum, row) => sum + row.tokens[field], 0)).toBe(bucket.tokens[field]);
      }
    }
  });

  it('counts refusals by limit kind and errors in the totals, every group and every bucket; refusals are not requests', async () => {
    const projectId = `proj_${randomBase62(12)}`;
    const meter = meterOn(store.usage);
    const kinds = ['requests', 'tokens', 'concurrency', 'budget'] as const;
    for (let i = 0; i < 40; i++) {
      // Refused: never admitted, so no "request" part.
      meter.record({ projectId, requestId: `refused_${i}`, apiKeyId: `key_${i % 2}`, model: i % 5 === 0 ? null : `m${i % 2}`, part: 'refusal', refusedBy: kinds[i % 4] });
    }
    for (let i = 0; i < 10; i++) {
      const requestId = `admitted_${i}`;
      meter.record({ projectId, requestId, apiKeyId: 'key_0', requests: 1, part: 'request', model: 'm0' });
      meter.record({ projectId, requestId, model: 'm0', promptTokens: 5, completionTokens: 1 });
      // Both reporters of an error answer (ModelCall.finish, the admission hook): one counts.
      if (i < 3) meter.record({ projectId, requestId, model: 'm0', part: 'error', errors: 1 });
      if (i < 3) meter.record({ projectId, requestId, model: 'm0', part: 'error', errors: 1 });
    }
    await meter.close();
    const total = await read(store.usage, projectId, {});
    expect(total.requests).toBe(10);
    expect(total.refusals).toEqual({ requests: 10, tokens: 10, concurrency: 10, budget: 10 });
    expect(total.errors).toBe(3);
    for (const groupBy of ['model', 'api_key'] as const) {
      const grouped = await read(store.usage, projectId, { groupBy, bucketWidth: '1m' });
      expect(grouped.refusals).toEqual(total.refusals);
      for (const kind of kinds) {
        expect(grouped.groups!.reduce((sum, row) => sum + row.refusals[kind], 0)).toBe(10);
        for (const bucket of grouped.buckets!) expect(bucket.groups!.reduce((sum, row) => sum + row.refusals[kind], 0)).toBe(bucket.refusals[kind]);
      }
      expect(grouped.groups!.reduce((sum, row) => sum + row.errors, 0)).toBe(3);
      expect(grouped.buckets!.reduce((sum, bucket) => sum + bucket.errors, 0)).toBe(3);
    }
    const byModel = (await read(store.usage, projectId, { groupBy: 'model' })).groups!;
    expect(byModel.map((row) => [row.model, row.requests, row.errors, row.refusals])).toEqual([
      ['m0', 10, 3, { requests: 8, tokens: 0, concurrency: 8, budget: 0 }],
      ['m1', 0, 0, { requests: 0, tokens: 8, concurrency: 0, budget: 8 }],
      [null, 0, 0, { requests: 2, tokens: 2, concurrency: 2, budget: 2 }],
    ]);
  });

  it('holds a flood of refusals as one buffered record per group and minute', async () => {
    const projectId = `proj_${randomBase62(12)}`;
    const meter = meterOn(store.usage);
    const atMs = Date.now();
    for (let i = 0; i < 5000; i++) meter.record({ projectId, requestId: `flood_${i}`, apiKeyId: 'key_f', model: 'm', part: 'refusal', refusedBy: 'requests', atMs });
    meter.record({ projectId, requestId: 'other', apiKeyId: 'key_g', model: 'm', part: 'refusal', refusedBy: 'tokens', atMs });
    expect(meter.buffered).toBe(2);
    await meter.close();
    const total = await read(store.usage, projectId, { groupBy: 'api_key' });
    expect(total.refusals).toEqual({ requests: 5000, tokens: 1, concurrency: 0, budget: 0 });
    expect(total.groups!.map((row) => [row.api_key, row.refusals.requests])).toEqual([['key_f', 5000], ['key_g', 0]]);
  });

  it('refuses cached or reasoning tokens that exceed their whole, and keeps the rest of the record', async () => {
    const projectId = `proj_${randomBase62(12)}`;
    const metrics = new Metrics({ defaultMetrics: false });
    const meter = meterOn(store.usage, metrics);
    meter.record({ projectId, requestId: 'r1', model: 'm', promptTokens: 10, completionTokens: 5, cachedPromptTokens: 8, cacheWriteTokens: 4, reasoningTokens: 6 });
    meter.record({ projectId, requestId: 'r2', model: 'm', promptTokens: 10, completionTokens: 5, cachedPromptTokens: 2.5, cacheWriteTokens: 3, reasoningTokens: 5 });
    await meter.close();
    const usage = await read(store.usage, projectId, {});
    expect(usage.tokens).toEqual({ prompt: 20, completion: 10, total: 30, cached_prompt: 0, cache_write: 3, reasoning: 5 });
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/nova_usage_invalid_values_total\{field="cachedPromptTokens"\} 2\b/);
    expect(text).toMatch(/nova_usage_invalid_values_total\{field="cacheWriteTokens"\} 1\b/);
    expect(text).toMatch(/nova_usage_invalid_values_total\{field="reasoningTokens"\} 1\b/);
  });

  it('refuses a bad number alone: 1e300 tokens leave the other records of the batch counted, and the refusal is counted', async () => {
    const projectId = `proj_${randomBase62(12)}`;
    const metrics = new Metrics({ defaultMetrics: false });
    const meter = meterOn(store.usage, metrics);
    for (let i = 0; i < 37; i++) {
      meter.record({ projectId, requestId: `r${i}`, requests: 1, part: 'request' });
      meter.record({ projectId, requestId: `r${i}`, model: 'm', promptTokens: i === 5 ? 1e300 : 10, completionTokens: i === 6 ? -4 : 2 });
    }
    meter.record({ projectId, requestId: 'r-nan', model: 'm', promptTokens: Number.NaN, completionTokens: 1.5, audioSeconds: Infinity, cost: Number.POSITIVE_INFINITY });
    await meter.close();
    const usage = await read(store.usage, projectId, {});
    expect(usage.requests).toBe(37);
    expect(usage.tokens.prompt).toBe(36 * 10);
    expect(usage.tokens.completion).toBe(36 * 2);
    expect(usage.audio_seconds).toBe(0);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/nova_usage_invalid_values_total\{field="promptTokens"\} 2\b/);
    expect(text).toMatch(/nova_usage_invalid_values_total\{field="completionTokens"\} 2\b/);
    expect(text).toMatch(/nova_usage_invalid_values_total\{field="audioSeconds"\} 1\b/);
    expect(text).toMatch(/nova_usage_invalid_values_total\{field="cost"\} 1\b/);
    expect(text).toMatch(/nova_usage_dropped_records_total 0\b/);
  });

  it('frees the storage of a conversation when it expires', async () => {
    const projectId = `proj_${randomBase62(12)}`;
    const meter = meterOn(store.usage);
    const message = { id: 'msg_1', role: 'user' as const, content: 'x'.repeat(500), created_at: new Date().toISOString() };
    const stored = await store.conversations.append({ projectId, conversationId: 'conv_short', model: 'm', existing: false, messages: [message], nowMs: Date.now(), retentionSeconds: 1 });
    const kept = await store.conversations.append({ projectId, conversationId: 'conv_long', model: 'm', existing: false, messages: [message], nowMs: Date.now(), retentionSeconds: 600 });
    meter.record({ projectId, requestId: 'w1', storageBytesDelta: stored!.bytes });
    meter.record({ projectId, requestId: 'w2', storageBytesDelta: kept!.bytes });
    await meter.close();
    expect(await store.usage.storageBytes(projectId)).toBe(stored!.bytes + kept!.bytes);
    await sleep(1300);
    expect(await store.conversations.get(projectId, 'conv_short')).toBeNull();
    expect(await store.usage.storageBytes(projectId)).toBe(kept!.bytes);
  });

  it('applies each batch once per replica with a high-water mark, not a key per batch', async () => {
    const projectId = `proj_${randomBase62(12)}`;
    const event = (id: string) => ({
      projectId,
      eventId: id,
      atMs: Date.now(),
      counts: { ...emptyCounts(), requests: 1 },
      storageBytesDelta: 0,
      model: null,
      apiKeyId: null,
    });
    const apply = (replica: string, seq: number, sub = 0) => store.usage.apply({ replica, seq, sub }, [event(`${replica}-${seq}-${sub}`)], RETENTION);
    await apply('r1', 1);
    await apply('r1', 1); // the retry of a batch whose reply was lost
    await apply('r1', 0); // older than the mark: already applied
    await apply('r1', 2);
    await apply('r1', 2, 1_000_000); // a refused batch's records, after its parts
    await apply('r1', 2, 1_000_000);
    await apply('r2', 1); // another replica's numbering is its own
    for (let seq = 3; seq < 200; seq++) await apply('r1', seq);
    expect((await read(store.usage, projectId, {})).requests).toBe(4 + 197);
    if (kind === 'redis') {
      // 200 batches later, the project holds one mark (its replicas'), not a key per batch.
      const client = new Redis(inject('redisUrl'));
      const keys = await client.keys(`*{${projectId}}*`);
      client.disconnect();
      expect(keys.filter((key) => key.endsWith(':usage:applied'))).toHaveLength(1);
      expect(keys.length).toBeLessThan(20);
    }
  });

  it('frees a deleted conversation once: the deletion, not its expiry later', async () => {
    const projectId = `proj_${randomBase62(12)}`;
    const meter = meterOn(store.usage);
    const message = { id: 'msg_1', role: 'user' as const, content: 'y'.repeat(300), created_at: new Date().toISOString() };
    const stored = await store.conversations.append({ projectId, conversationId: 'conv_gone', model: 'm', existing: false, messages: [message], nowMs: Date.now(), retentionSeconds: 1 });
    meter.record({ projectId, requestId: 'w1', storageBytesDelta: stored!.bytes });
    const freed = await store.conversations.delete(projectId, 'conv_gone');
    expect(freed).toBe(stored!.bytes);
    meter.record({ projectId, requestId: 'd1', storageBytesDelta: -freed! });
    await meter.close();
    await sleep(1300);
    expect(await store.usage.storageBytes(projectId)).toBe(0);
    expect(await store.conversations.delete(projectId, 'conv_gone')).toBeNull();
  });
});

describe('usage reads are bounded', () => {
  it('reads the widest window in one Redis command per call, whatever the retention holds', async () => {
    const client = createRedisClient({ url: inject('redisUrl'), mode: 'standalone', commandTimeoutMs: 2000 });
    await waitUntilReady(client, 5000);
    const store = new RedisStore(client, `b${randomBase62(8)}`);
    const projectId = `proj_${randomBase62(12)}`;
    // A day of minutes with traffic, written as if it had happened.
    const meter = meterOn(store.usage);
    const now = Date.now();
    for (let minute = 0; minute < 24 * 60; minute++) {
      meter.record({ projectId, requestId: `q${minute}`, requests: 1, part: 'request', atMs: now - minute * 60_000 });
    }
    await meter.close();
    const commands: string[] = [];
    const send = client.sendCommand.bind(client);
    client.sendCommand = ((command: { name: string }) => {
      commands.push(command.name);
      return send(command as never);
    }) as typeof client.sendCommand;
    const widest = await read(store.usage, projectId, WIDEST);
    const day = await read(store.usage, projectId, { startTime: new Date(now - 24 * HOUR_MS + 60_000).toISOString(), bucketWidth: '1h' });
    expect(widest.granularity).toBe('hour');
    expect(widest.requests).toBe(24 * 60);
    expect(day.granularity).toBe('minute');
    expect(day.requests).toBe(24 * 60);
    // Two reads, each: one bucket script and one storage script (a script loads once at most).
    const sent = commands.filter((name) => name !== 'script');
    expect(sent.length).toBeGreaterThanOrEqual(2);
    expect(sent.length).toBeLessThanOrEqual(4);
    await store.close();
  });
});

/**
 * A Redis store whose project holds, in its current minute and hour, buckets as an older
 * apply-usage.lua wrote them: `value` (its measures, comma-separated) under each group given.
 */
async function storeWithOldBuckets(value: string, groups: (readonly ['all' | 'model', string])[]) {
  const client = createRedisClient({ url: inject('redisUrl'), mode: 'standalone', commandTimeoutMs: 2000 });
  await waitUntilReady(client, 5000);
  const prefix = `o${randomBase62(8)}`;
  const store = new RedisStore(client, prefix);
  const projectId = `proj_${randomBase62(12)}`;
  const minute = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS;
  for (const [unit, start] of [['m', minute], ['h', Math.floor(minute / HOUR_MS) * HOUR_MS]] as const) {
    for (const [dimension, group] of groups) {
      await client.hset(`${prefix}:{${projectId}}:usage:${unit}:${dimension}`, `${start}|${group}`, value);
      await client.zadd(`${prefix}:{${projectId}}:usage:${unit}:${dimension}:idx`, start, `${start}|${group}`);
    }
  }
  return { store, projectId, minute };
}

describe('usage buckets written before the refusals and errors', () => {
  it('read them 0, and take them on their next write', async () => {
    // What apply-usage.lua wrote before: `r,pt,ct,img,aud,cu,ca,cpt,cwt,rt` per bucket.
    const { store, projectId, minute } = await storeWithOldBuckets('3,30,12,0,0,7,500,4,1,2', [['all', ''], ['model', 'm']]);
    const before = await read(store.usage, projectId, { groupBy: 'model' });
    expect(before).toMatchObject({ requests: 3, refusals: { requests: 0, tokens: 0, concurrency: 0, budget: 0 }, errors: 0 });
    expect(before.tokens).toMatchObject({ prompt: 30, cached_prompt: 4, reasoning: 2 });
    expect(before.groups!.map((row) => [row.model, row.refusals.requests, row.errors])).toEqual([['m', 0, 0]]);
    const meter = meterOn(store.usage);
    meter.record({ projectId, requestId: 'refused', model: 'm', part: 'refusal', refusedBy: 'budget', atMs: minute });
    meter.record({ projectId, requestId: 'failed', model: 'm', part: 'error', errors: 1, atMs: minute });
    await meter.close();
    const after = await read(store.usage, projectId, { groupBy: 'model' });
    expect(after).toMatchObject({ requests: 3, refusals: { requests: 0, tokens: 0, concurrency: 0, budget: 1 }, errors: 1 });
    expect(after.tokens).toMatchObject({ prompt: 30, cached_prompt: 4, reasoning: 2 });
    expect(after.groups!.map((row) => [row.model, row.requests, row.refusals.budget, row.errors])).toEqual([['m', 3, 1, 1]]);
    await store.close();
  });
});

describe('usage buckets written before the cache and reasoning tokens', () => {
  it('read as before, the new measures 0, and take the new measures on their next write', async () => {
    // What apply-usage.lua wrote before: `r,pt,ct,img,aud,cu,ca` per bucket.
    const { store, projectId, minute } = await storeWithOldBuckets('2,30,12,0,0,7,500', [['all', '']]);
    expect((await read(store.usage, projectId, {})).tokens).toEqual({ prompt: 30, completion: 12, total: 42, cached_prompt: 0, cache_write: 0, reasoning: 0 });
    const meter = meterOn(store.usage);
    meter.record({ projectId, requestId: 'new', model: 'm', promptTokens: 10, completionTokens: 4, cachedPromptTokens: 6, cacheWriteTokens: 1, reasoningTokens: 2, atMs: minute });
    await meter.close();
    const after = await read(store.usage, projectId, {});
    expect(after.tokens).toEqual({ prompt: 40, completion: 16, total: 56, cached_prompt: 6, cache_write: 1, reasoning: 2 });
    expect(after.cost).toBeCloseTo(7e-6, 12);
    await store.close();
  });
});

