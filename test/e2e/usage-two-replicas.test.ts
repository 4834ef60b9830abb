import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { silentWav } from '../support/wav.js';
import type { UsageAnswer, UsageGroupRow } from '../support/usage-answer.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const FLUSH_MS = 200;
const PRICES = {
  'chat-a': { input: 2.5, output: 10 },
  'chat-c': { input: 0.15, output: 0.6 },
  // chat-b's primary fails: the fallback served it, at the fallback's own prices.
  'chat-b': { input: 3.3, output: 13.7 },
  // Priced by the tokens its upstream reports.
  painter: { input: 5, output: 40 },
};

/**
 * Two real processes on one Redis (issue 11's acceptance): calls go to replica A, usage is
 * read from replica B, in a window that starts mid-minute and in one that is a single second.
 */
describe('usage across two replicas', () => {
  let upstream: LoopbackUpstream;
  let a: GatewayProcess;
  let b: GatewayProcess;
  let auth: { authorization: string };
  let projectId: string;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({
      down: { status: 503 },
      early: { closeAfterChunks: 2, chunkDelayMs: 10 },
      media: { imageUsage: { input_tokens: 50, output_tokens: 4160, total_tokens: 4210 } },
    });
    const configYaml = `
models:
  - id: chat-a
    upstream: ${upstream.baseUrl()}
    pricing: { input_per_million: ${PRICES['chat-a'].input}, output_per_million: ${PRICES['chat-a'].output} }
  - id: chat-b
    upstream: ${upstream.baseUrl('down')}
    pricing: { input_per_million: 100, output_per_million: 100 }
    fallbacks:
      - upstream: ${upstream.baseUrl()}
        pricing: { input_per_million: ${PRICES['chat-b'].input}, output_per_million: ${PRICES['chat-b'].output} }
  - id: chat-c
    upstream: ${upstream.baseUrl('early')}
    pricing: { input_per_million: ${PRICES['chat-c'].input}, output_per_million: ${PRICES['chat-c'].output} }
  - id: painter
    upstream: ${upstream.baseUrl('media')}
    endpoints: [images]
    pricing: { input_per_million: ${PRICES.painter.input}, output_per_million: ${PRICES.painter.output} }
  - id: voice
    upstream: ${upstream.baseUrl('media')}
    endpoints: [audio]
redis:
  key_prefix: e2eu${randomBase62(8)}
usage:
  flush_interval_ms: ${FLUSH_MS}
`;
    const env = { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN };
    [a, b] = await Promise.all([GatewayProcess.start({ env, configYaml }), GatewayProcess.start({ env, configYaml })]);
    ({ projectId, auth } = await a.createProject({ name: 'billing' }));
  });

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await upstream?.close();
  });

  const post = async (gateway: GatewayProcess, path: string, body: unknown) => {
    const response = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await response.text();
    if (response.status !== 200) console.log(path, JSON.stringify(body), response.status, text);
    return response.status;
  };
  const usage = async (gateway: GatewayProcess, query: string) => {
    const response = await fetch(`${gateway.url}/v1/projects/${projectId}/usage?${query}`, { headers: auth });
    expect(response.status).toBe(200);
    return (await response.json()) as UsageAnswer;
  };
  const iso = (ms: number) => new Date(ms).toISOString();

  it('counts every request, token, image and audio second, with cost, on the other replica within flush + 1 s', async () => {
    // All calls inside one minute, so the one-second window covers them (its minute counts whole).
    if (new Date().getUTCSeconds() >= 45) await sleep(61_000 - (Date.now() % 60_000));
    const first = Date.now();
    const message = [{ role: 'user', content: 'count me' }];
    expect(await post(a, '/v1/chat/completions', { model: 'chat-a', messages: message })).toBe(200);
    expect(await post(a, '/v1/chat/completions', { model: 'chat-a', messages: message })).toBe(200);
    expect(await post(a, '/v1/chat/completions', { model: 'chat-a', messages: message, stream: true })).toBe(200);
    expect(await post(a, '/v1/chat/completions', { model: 'chat-b', messages: message })).toBe(200);
    expect(await post(a, '/v1/chat/completions', { model: 'chat-c', messages: message, stream: true })).toBe(200);
    expect(await post(a, '/v1/images/generations', { model: 'painter', prompt: 'a lighthouse', n: 2 })).toBe(200);
    const form = new FormData();
    form.append('model', 'voice');
    form.append('file', new Blob([new Uint8Array(silentWav(1))], { type: 'audio/wav' }), 'a.wav');
    const transcription = await fetch(`${a.url}/v1/audio/transcriptions`, { method: 'POST', headers: auth, body: form });
    expect(transcription.status).toBe(200);
    await transcription.arrayBuffer();
    const done = Date.now();

    const midMinute = `start_time=${iso(first - 1000)}&end_time=${iso(first + 60_000)}&group_by=model`;
    const sameSecond = `start_time=${iso(Math.floor(first / 1000) * 1000)}&end_time=${iso(Math.floor(first / 1000) * 1000 + 1000)}&group_by=model`;
    const rowOf = (answer: UsageAnswer, model: string | null) => answer.groups!.find((row) => row.model === model);
    // Freshness: B shows what A served within usage.flush_interval_ms + 1 s.
    let seen = {} as UsageAnswer;
    while (Date.now() - done < FLUSH_MS + 1000) {
      seen = await usage(b, midMinute);
      if (rowOf(seen, 'voice')?.audio_seconds === 4.25 && rowOf(seen, 'chat-c')?.requests === 1 && rowOf(seen, 'painter')) break;
      await sleep(50);
    }
    expect(Date.now() - done).toBeLessThan(FLUSH_MS + 1000);

    const windows: [UsageAnswer, number][] = [
      [seen, first - 1000],
      [await usage(b, sameSecond), Math.floor(first / 1000) * 1000],
    ];
    for (const [answer, askedStart] of windows) {
      expect(answer.granularity).toBe('minute');
      // The covered start: the edge of the minute the asked start falls in.
      expect(Date.parse(answer.start_time)).toBe(Math.floor(askedStart / 60_000) * 60_000);
      expect(Date.parse(answer.end_time)).toBeGreaterThan(done);
      const chatA = rowOf(answer, 'chat-a')!;
      expect(chatA).toMatchObject({ requests: 3, tokens: { prompt: 21, completion: 15, total: 36 } });
      expect(rowOf(answer, 'chat-b')).toMatchObject({ requests: 1, tokens: { prompt: 7, completion: 5 } });
      expect(rowOf(answer, 'painter')).toMatchObject({ requests: 1, image_generations: 2, tokens: { prompt: 50, completion: 4160 } });
      expect(rowOf(answer, 'voice')).toMatchObject({ requests: 1, audio_seconds: 4.25 });
      const chatC = rowOf(answer, 'chat-c')!;
      expect(chatC.requests).toBe(1);
      expect(chatC.tokens.completion).toBeGreaterThan(0);
      // The totals hold everything: the calls, plus the usage reads (requests without a model).
      expect(answer.requests).toBeGreaterThanOrEqual(7);
      expect(answer.requests).toBe(answer.groups!.reduce((sum, row) => sum + row.requests, 0));
      expect(answer.tokens.prompt).toBe(21 + 7 + 50 + chatC.tokens.prompt);
      expect(answer.image_generations).toBe(2);
      expect(answer.audio_seconds).toBe(4.25);
      // Cost: per request, priced by the target that served it (chat-b's fallback), streams that ended early included.
      const priced = (model: keyof typeof PRICES, row: UsageGroupRow) =>
        (row.tokens.prompt * PRICES[model].input + row.tokens.completion * PRICES[model].output) / 1e6;
      const expected = {
        'chat-a': priced('chat-a', chatA),
        'chat-b': priced('chat-b', rowOf(answer, 'chat-b')!),
        'chat-c': priced('chat-c', chatC),
        painter: priced('painter', rowOf(answer, 'painter')!),
      };
      for (const [model, cost] of Object.entries(expected)) expect(Math.abs(rowOf(answer, model)!.cost - cost) / cost).toBeLessThan(1e-9);
      const total = Object.values(expected).reduce((sum, cost) => sum + cost, 0);
      expect(Math.abs(answer.cost - total) / total).toBeLessThan(1e-9);
    }

    // The ungrouped answer and the per-key breakdown agree with the per-model one.
    const plain = await usage(b, `start_time=${iso(first - 1000)}&end_time=${iso(first + 60_000)}&bucket_width=1m`);
    const byKey = await usage(b, `start_time=${iso(first - 1000)}&end_time=${iso(first + 60_000)}&group_by=api_key`);
    expect(byKey.groups).toHaveLength(1);
    expect(byKey.groups![0]!.tokens).toEqual(plain.tokens);
    expect(Math.abs(byKey.groups![0]!.cost - plain.cost)).toBeLessThan(1e-15);
    expect(plain.buckets!.reduce((sum, bucket) => sum + bucket.cost, 0)).toBeCloseTo(plain.cost, 12);

    // A's cost counter carries the same money, per model.
    const metrics = await (await fetch(`http://127.0.0.1:${a.metricsPort}/metrics`)).text();
    const counter = new RegExp(`nova_usage_cost_dollars_total\\{project_id="${projectId}",gen_ai_request_model="chat-a"\\} ([0-9.e-]+)`).exec(metrics);
    expect(Number(counter?.[1])).toBeCloseTo(rowOf(seen, 'chat-a')!.cost, 12);
  });

  it('refuses to start with a negative price, naming the field', async () => {
    const started = GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN },
      configYaml: `
models:
  - id: chat-a
    upstream: ${upstream.baseUrl()}
    pricing: { input_per_million: -2.5, output_per_million: 10 }
`,
    });
    await expect(started).rejects.toThrow(/models\[0\]\.pricing\.input_per_million/);
  });
});
