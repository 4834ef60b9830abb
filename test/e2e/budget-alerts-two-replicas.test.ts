import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { BudgetThresholdCrossed as Crossing } from '../../src/alerts/alert-events.js';
import { randomBase62 } from '../../src/core/ids.js';
import { budgetPeriodsAt } from '../../src/quota/budget-periods.js';
import type { DeliveryRecord } from '../../src/store/alert-types.js';
import { until, WebhookReceiver, type ReceivedHook } from '../alerts/webhook-receiver.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { ReplicaPair } from '../support/replica-pair.js';
import type { TestProject } from '../support/test-app.js';

const ADMIN_TOKEN = `alerts-admin-${randomBase62(24)}`;
const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
/** The config webhook's signing secret, given to the processes through `secret_env` only. */
const SECRET_ENV = 'NOVA_TEST_ALERT_SECRET';
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const HI = [{ role: 'user', content: 'hi' }];
/** What one `spend-1` call really uses (60 prompt + 5 completion), well above the 17 + 5 it reserves. */
const USED = 65;
/** Time allowed for a stray second copy of an event to arrive: many poll rounds and retry delays. */
const STRAYS_MS = 2000;

/** A standard-format delivery: verified against `secret` (throws when the signature does not hold). */
function verified(hook: ReceivedHook, secret: string): { id: string; type: string; data: Crossing } {
  const payload = new Webhook(secret).verify(hook.body, hook.headers as Record<string, string>) as { type: string; data: Crossing };
  return { id: String(hook.headers['webhook-id']), ...payload };
}

const ofProject = (receiver: WebhookReceiver, projectId: string) =>
  receiver.received.filter((hook) => (JSON.parse(hook.body) as { data?: { project_id?: string } }).data?.project_id === projectId);

/** A UTC day boundary in the middle of a test would split its budget in two: start well after it. */
async function clearOfMidnight(marginMs = 20_000): Promise<void> {
  const left = budgetPeriodsAt(Date.now()).dayEndMs - Date.now();
  if (left < marginMs) await sleep(left + 1000);
}

/**
 * DESIGN.md section 9, budget alerts, on two real gateway processes sharing one Redis: concurrent
 * settlements on both replicas tell each threshold of a budget once, to a config webhook (signed per
 * Standard Webhooks, its secret from `secret_env`) and to a project's own (Slack) webhook; a delivery
 * still pending while the replicas stop is delivered, once, by a replica started again. Upstream and
 * receivers are on 127.0.0.1.
 */
describe('budget alerts: two processes on one Redis', () => {
  let upstream: LoopbackUpstream;
  let pair: ReplicaPair;
  /** The config webhook's receiver: every project's events. */
  let hooks: WebhookReceiver;
  let env: Record<string, string>;
  let configYaml: string;
  /** Processes started by a test (besides the pair), stopped at the end. */
  const started: GatewayProcess[] = [];

  beforeAll(async () => {
    hooks = await new WebhookReceiver().start();
    upstream = await LoopbackUpstream.start({ spend: { latencyMs: 400, promptTokens: 60, chunks: ['a', 'b', 'c', 'd', 'e'] } });
    configYaml = [
      'models:',
      '  - id: spend-1',
      `    upstream: ${upstream.baseUrl('spend')}`,
      'redis:',
      `  key_prefix: ba${randomBase62(8)}`,
      'usage:',
      '  flush_interval_ms: 200',
      'alerts:',
      '  webhooks:',
      `    - url: ${hooks.url}`,
      `      secret_env: ${SECRET_ENV}`,
      // Enough attempts to outlast the replicas' restart, each soon after the last.
      `  retry_delays_ms: [${Array.from({ length: 30 }, () => 300).join(', ')}]`,
      '  delivery_timeout_ms: 3000',
      '  poll_interval_ms: 50',
      '  claim_timeout_ms: 1000',
      '',
    ].join('\n');
    env = { REDIS_URL: inject('redisUrl'), REDIS_MODE: 'standalone', NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'warn', [SECRET_ENV]: SECRET };
    pair = await ReplicaPair.start({ env, configYaml });
  });
  afterAll(async () => {
    await Promise.all([pair?.stop(), ...started.map((gateway) => gateway.stop())]);
    await upstream?.close();
    await hooks?.stop();
  });

  /** A project (generous request rate) with `policy`, its budgets set through replica b's admin API. */
  async function project(policy: Record<string, unknown>): Promise<TestProject> {
    const created = await pair.project('budget-alerts');
    await pair.patchProject(created, policy);
    return created;
  }

  /** A new key of `owner` with `limits`, created through replica a. */
  async function key(owner: TestProject, limits: Record<string, unknown>): Promise<TestProject> {
    const response = await pair.post(pair.a, owner, '/v1/api-keys', { name: 'agent', project_id: owner.projectId, ...limits });
    const body = (await response.json()) as { id: string; secret: string };
    expect(response.status, JSON.stringify(body)).toBe(200);
    return { projectId: owner.projectId, keyId: body.id, secret: body.secret, auth: { authorization: `Bearer ${body.secret}` } };
  }

  async function addWebhook(gateway: GatewayProcess, owner: TestProject, body: Record<string, unknown>): Promise<{ id: string; secret: string | null }> {
    const response = await fetch(`${gateway.url}/admin/v1/projects/${owner.projectId}/webhooks`, { method: 'POST', headers: admin, body: JSON.stringify(body) });
    const added = (await response.json()) as { id: string; secret: string | null };
    expect(response.status, JSON.stringify(added)).toBe(200);
    return added;
  }

  async function deliveries(gateway: GatewayProcess, projectId: string): Promise<DeliveryRecord[]> {
    const response = await fetch(`${gateway.url}/admin/v1/webhook-deliveries?project_id=${projectId}`, { headers: admin });
    expect(response.status).toBe(200);
    return ((await response.json()) as { data: DeliveryRecord[] }).data;
  }

  const chat = (gateway: GatewayProcess, caller: TestProject) => pair.post(gateway, caller, '/v1/chat/completions', { model: 'spend-1', messages: HI, max_tokens: 5 });

  it("tells each threshold of a key's and a project's daily budget once, signed, under concurrent settlements on both replicas", async () => {
    await clearOfMidnight();
    const { day: dayBefore } = budgetPeriodsAt(Date.now());
    // The project's 2000 is passed at 0.5 (1000) whatever the interleaving, never at 0.8 (1600).
    const owner = await project({ daily_tokens: 2000 });
    const agent = await key(owner, { budgets: { daily_tokens: 1000 } });
    // 20 calls at once, alternating replicas: each reserves 22 and uses 65. All are admitted if they
    // arrive together (1300 used); even one at a time, 16 are (1040): past 1.0 of the key's 1000.
    const answers = await Promise.all(Array.from({ length: 20 }, async (_, i) => (await chat(pair.at(i), agent)).status));
    const admitted = answers.filter((status) => status === 200).length;
    expect(answers.every((status) => status === 200 || status === 429), answers.join(' ')).toBe(true);
    expect(admitted).toBeGreaterThanOrEqual(16);
    const spent = admitted * USED;
    const { day } = budgetPeriodsAt(Date.now());
    expect(day).toBe(dayBefore);

    // Three crossings of the key's budget and one of the project's.
    await until(() => ofProject(hooks, owner.projectId).length >= 4, 40_000);
    await sleep(STRAYS_MS);
    const received = ofProject(hooks, owner.projectId);
    const events = received.map((hook) => verified(hook, SECRET));
    expect(events.every((event) => event.type === 'budget.threshold_crossed')).toBe(true);
    expect(new Set(events.map((event) => event.id)).size, 'one webhook-id per event').toBe(events.length);
    const told = events.map((event) => event.data).sort((x, y) => String(x.api_key_id).localeCompare(String(y.api_key_id)) || x.threshold - y.threshold);
    const common = { project_id: owner.projectId, budget: 'daily_tokens', period: day };
    expect(told).toEqual([
      { ...common, api_key_id: agent.keyId, threshold: 0.5, used: expect.any(Number), limit: 1000 },
      { ...common, api_key_id: agent.keyId, threshold: 0.8, used: expect.any(Number), limit: 1000 },
      { ...common, api_key_id: agent.keyId, threshold: 1, used: expect.any(Number), limit: 1000 },
      { ...common, api_key_id: null, threshold: 0.5, used: expect.any(Number), limit: 2000 },
    ]);
    // `used` is the settled use of the settlement that crossed: whole calls, at least the threshold's share, at most all.
    for (const event of told) {
      expect(event.used % USED, JSON.stringify(event)).toBe(0);
      expect(event.used, JSON.stringify(event)).toBeGreaterThanOrEqual(event.threshold * event.limit);
      expect(event.used, JSON.stringify(event)).toBeLessThanOrEqual(spent);
    }
    // A receiver that checks the signature with another secret refuses every one.
    const wrong = `whsec_${randomBytes(32).toString('base64')}`;
    for (const hook of received) expect(() => verified(hook, wrong)).toThrow();
    // The delivery log agrees: four deliveries to the config webhook, each delivered at its first attempt.
    const log = await deliveries(pair.b, owner.projectId);
    expect(log.map((delivery) => [delivery.status, delivery.attempts, delivery.last_status_code])).toEqual(Array.from({ length: 4 }, () => ['delivered', 1, 200]));
  }, 90_000);

  it('a Slack webhook added through the admin API is told its threshold as {"text": …}', async () => {
    await clearOfMidnight();
    const slack = await new WebhookReceiver().start();
    try {
      const owner = await project({ daily_tokens: 100 });
      const added = await addWebhook(pair.a, owner, { url: slack.url, format: 'slack', thresholds: [0.8] });
      expect(added.secret).toBeNull();
      // 65 (past 0.5) through a, then 130 (past 0.8 and 1.0) through b.
      expect((await chat(pair.a, owner)).status).toBe(200);
      expect((await chat(pair.b, owner)).status).toBe(200);
      const { day } = budgetPeriodsAt(Date.now());
      await until(() => slack.received.length >= 1, 20_000);
      // The config webhook is told all three; the Slack one only its 0.8.
      await until(() => ofProject(hooks, owner.projectId).length >= 3, 20_000);
      await sleep(STRAYS_MS);
      expect(slack.received).toHaveLength(1);
      const hook = slack.received[0]!;
      expect(hook.headers['content-type']).toContain('application/json');
      expect(hook.headers['webhook-signature']).toBeUndefined();
      expect(JSON.parse(hook.body)).toEqual({ text: `Budget alert: Project ${owner.projectId} has used 80% of its daily_tokens budget for ${day} (130 of 100).` });
      const thresholds = ofProject(hooks, owner.projectId).map((received) => verified(received, SECRET).data.threshold);
      expect(thresholds.sort()).toEqual([0.5, 0.8, 1]);
    } finally {
      await slack.stop();
    }
  }, 60_000);

  it('a delivery pending while both replicas stop is delivered once by a replica started again', async () => {
    await clearOfMidnight();
    // The receiver is down: its port is known, nothing listens on it.
    const down = await new WebhookReceiver().start();
    await down.stop();
    const owner = await project({ daily_tokens: 100 });
    const added = await addWebhook(pair.b, owner, { url: down.url, thresholds: [1] });
    expect(added.secret).toMatch(/^whsec_/);
    expect((await chat(pair.b, owner)).status).toBe(200);
    expect((await chat(pair.a, owner)).status).toBe(200);
    const { day } = budgetPeriodsAt(Date.now());
    const ownDelivery = async (gateway: GatewayProcess) => (await deliveries(gateway, owner.projectId)).find((delivery) => delivery.webhook_id === added.id);
    // Attempted (the connection refused) and due again.
    await until(async () => {
      const delivery = await ownDelivery(pair.a);
      return delivery !== undefined && delivery.attempts >= 1 && delivery.status === 'pending';
    }, 20_000);
    expect(await ownDelivery(pair.a)).toMatchObject({ status: 'pending', last_status_code: null });

    // One replica killed, the other stopped: no process is left to deliver.
    pair.a.signal('SIGKILL');
    await Promise.all([pair.a.waitForExit(), pair.b.stop()]);
    // Started again while the receiver is still down.
    const again = await GatewayProcess.start({ env, configYaml, waitForReady: false });
    started.push(again);
    await again.waitUntilReady(30_000);
    const before = (await ownDelivery(again))!;
    expect(before.status).toBe('pending');
    await down.start();
    // A replica killed amid an attempt leaves it leased for 2 x 3 s + 5 s (delivery-worker.ts).
    await until(() => down.received.length >= 1, 25_000);
    await sleep(STRAYS_MS);

    expect(down.received).toHaveLength(1);
    const event = verified(down.received[0]!, added.secret!);
    expect(event.data).toEqual({ project_id: owner.projectId, api_key_id: null, budget: 'daily_tokens', period: day, threshold: 1, used: 130, limit: 100 });
    const delivered = await ownDelivery(again);
    expect(delivered).toMatchObject({ status: 'delivered', last_status_code: 200, event_id: event.id });
    expect(delivered!.attempts).toBeGreaterThan(before.attempts);
    expect(delivered!.attempts).toBeGreaterThan(1);
  }, 60_000);
});
