import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { asciiText } from '../support/charge-fixtures.js';
import { askRedis, RedisProcess } from '../support/redis-server.js';
import { ReplicaPair, settle } from '../support/replica-pair.js';
import type { TestProject } from '../support/test-app.js';
import { VllmLikeUpstream } from '../support/vllm-like-upstream.js';

const ADMIN_TOKEN = `charges-store-${randomBase62(24)}`;
const PREFIX = `chs${randomBase62(8)}`;
const FLUSH_MS = 200;
/** What one stored reply of max_tokens 5 may add (an assistant message record: role, 20 bytes of content, id, created_at): generously. */
const REPLY_BYTES = 512;

/**
 * Issue 29's acceptance, the rows about the store ("Charges that hold", docs/limits-and-usage.md):
 * the stored-conversation bound under concurrency and against a chunked body, and the budgets
 * after a Redis outage. Two real gateway processes on a redis-server of this file's own (it is
 * SIGSTOPped), in front of a backend that charges like vLLM (test/support/vllm-like-upstream.ts).
 */
describe('charges that hold: the store (two processes on one standalone Redis of their own)', () => {
  let redis: RedisProcess;
  let upstream: VllmLikeUpstream;
  let pair: ReplicaPair;

  beforeAll(async () => {
    redis = await RedisProcess.start();
    upstream = await VllmLikeUpstream.start({ fast: {} });
    pair = await ReplicaPair.start({
      env: { REDIS_URL: redis.url, NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'error' },
      configYaml: `
models:
  - id: vllm-1
    upstream: ${upstream.baseUrl('fast')}
redis:
  key_prefix: ${PREFIX}
  command_timeout_ms: 250
usage:
  flush_interval_ms: ${FLUSH_MS}
`,
    });
  }, 120_000);
  afterAll(async () => {
    await pair?.stop();
    await upstream?.close();
    await redis?.stop();
  });

  async function tenant(policy: Record<string, unknown> = {}): Promise<{ project: TestProject; tag: string }> {
    const project = await pair.project('charges-store', policy);
    return { project, tag: `[${project.projectId}]` };
  }

  it('40 concurrent store: true chats at a 300 KB bound: what is held stays within the bound plus the replies in flight', async () => {
    const bound = 300_000;
    const { project, tag } = await tenant({ max_conversation_bytes: bound });
    const answers = await pair.burst(project, 40, (i) => ({
      model: 'vllm-1',
      messages: [{ role: 'user', content: `${tag} ${i} ${asciiText(30_000)}` }],
      max_tokens: 5,
      store: true,
    }));
    const stored = answers.filter((answer) => answer.status === 200).length;
    const refused = answers.filter((answer) => answer.status === 429);
    expect(stored + refused.length, JSON.stringify(answers.filter((answer) => answer.status !== 200 && answer.status !== 429))).toBe(40);
    expect(stored).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    expect(JSON.parse(refused[0]!.body).error).toMatchObject({ code: 'storage_quota_exceeded', param: 'store' });
    // Every answered exchange's write was issued before its answer; reading through both replicas orders after them.
    const held = (await pair.conversations(project)).bytes_held;
    const allowance = bound + 40 * REPLY_BYTES;
    expect(held, `${stored} of 40 stored ~30 KB exchanges: ${held} bytes held at a bound of ${bound} (${(held / bound).toFixed(2)}x)`).toBeLessThanOrEqual(allowance);
    expect(stored * 30_000).toBeLessThanOrEqual(allowance);
  }, 60_000);

  it('one chunked body (no Content-Length) with store: true cannot pass the bound', async () => {
    const bound = 100_000;
    const { project, tag } = await tenant({ max_conversation_bytes: bound });
    const body = Buffer.from(JSON.stringify({ model: 'vllm-1', messages: [{ role: 'user', content: `${tag} ${asciiText(390_000)}` }], max_tokens: 5, store: true }));
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const request = httpRequest(`${pair.a.url}/v1/chat/completions`, { method: 'POST', headers: { ...project.auth, 'content-type': 'application/json' } }, (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
      });
      request.on('error', reject);
      // Eight chunks, no Content-Length: Transfer-Encoding: chunked.
      for (let at = 0; at < body.length; at += Math.ceil(body.length / 8)) request.write(body.subarray(at, at + Math.ceil(body.length / 8)));
      request.end();
    });
    const held = (await pair.conversations(project)).bytes_held;
    expect(held, `a chunked ${body.length}-byte body answered ${answer.status}; ${held} bytes held at a bound of ${bound}`).toBeLessThanOrEqual(bound);
    expect(answer.status, answer.text).toBe(429);
    expect(JSON.parse(answer.text).error).toMatchObject({ code: 'storage_quota_exceeded', param: 'store' });
  }, 60_000);

  it('Redis SIGSTOPped for 4 s under traffic: once it is back the budget counters equal the usage served', async () => {
    const { project, tag } = await tenant({ daily_tokens: 1_000_000_000, monthly_tokens: 1_000_000_000 });
    let running = true;
    let sent = 0;
    const statuses = new Map<number, number>();
    // Three workers, each one call at a time through alternating replicas, at most 600 calls in all.
    const worker = async (w: number) => {
      for (let i = 0; running && sent < 600; i++) {
        sent++;
        const response = await pair
          .post(pair.at(w + i), project, '/v1/chat/completions', { model: 'vllm-1', messages: [{ role: 'user', content: `${tag} call ${w}.${i}` }], max_tokens: 20 + ((w * 37 + i * 11) % 180) })
          .catch(() => null);
        const status = response?.status ?? 0;
        await response?.text().catch(() => '');
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        await sleep(15);
      }
    };
    const workers = Promise.all([0, 1, 2].map(worker));
    await sleep(1500);
    redis.freeze();
    await sleep(4000);
    redis.thaw();
    await sleep(2000);
    running = false;
    await workers;
    await upstream.waitIdle(tag);
    const served = upstream.servedTagged(tag);
    console.info(`SIGSTOP traffic: ${sent} calls, statuses ${JSON.stringify(Object.fromEntries(statuses))}, ${served} tokens served`);
    expect(statuses.get(200) ?? 0).toBeGreaterThan(0);

    // The usage records are exact.
    const usage = await settle(() => pair.usageTokens(project), (tokens) => tokens === served, 20_000);
    expect(usage, `usage ${usage} tokens for ${served} served`).toBe(served);
    // The budget counters catch up with them.
    const budgetKey = `${PREFIX}:{${project.projectId}}:rl:budget`;
    const counters = await settle(
      async () => {
        const [day, month] = (await askRedis(redis.port, ['HMGET', budgetKey, 'dt', 'mt'])) as [string | null, string | null];
        return { daily: Number(day), monthly: Number(month) };
      },
      (value) => value.daily === served && value.monthly === served,
      20_000,
    );
    expect(counters, `budget counters after the outage; the usage served is ${served}`).toEqual({ daily: served, monthly: served });
  }, 60_000);
});
