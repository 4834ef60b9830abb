import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { startReplicas, type FleetReplica } from '../support/fleet-upstream.js';
import { GatewayProcess } from '../support/gateway-process.js';
import type { TestProject } from '../support/test-app.js';

/** Service times (ms) of the replicas, per model. */
const BALANCED_MS = 200;
const WEIGHTED_MS = 20;
const CAPPED_MS = 200;
const FAIR_MS = 250;
const DEPTH_MS = 1000;
const WAIT_MS = 1500;
const LEAVE_MS = 1500;
const HEALTH_MS = 50;
const PRIORITY_MS = 250;
/** The health settings of the health models: ejected after 3 failures in a row, for 2 s. */
const EJECT_AFTER = 3;
const EJECT_SECONDS = 2;

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
  /** Milliseconds from sending the request to its whole answer. */
  ms: number;
  /** Date.now() when the whole answer was in. */
  at: number;
}

/**
 * Model fleets (DESIGN.md section 10) on the real server process: one model served by several
 * equal targets, each a real HTTP server on 127.0.0.1 that takes a set time per request, counts its
 * requests in flight and received, fails and recovers on demand (test/support/fleet-upstream.ts).
 * Balancing (least outstanding, weighted round robin), the per-target cap with its queue, fairness
 * of the queue across projects and by priority (a key's, else its project's), the queue's bounds, a
 * client leaving the queue, and passive health (ejection after failures, the probe, coming back).
 * Timing asserts are loose (several service times) but each fails for a FIFO or strict-priority
 * queue, an unbounded target or a target never ejected. One gateway, memory store; each model has its
 * own replicas and each test its own projects, so the tests do not see each other's traffic.
 */
describe('model fleets: balancing, per-target caps, fair queueing, priority, health (real process)', () => {
  let gateway: GatewayProcess;
  let balanced: FleetReplica[];
  let weighted: FleetReplica[];
  let capped: FleetReplica[];
  let fair: FleetReplica[];
  let depth: FleetReplica[];
  let waiting: FleetReplica[];
  let leaving: FleetReplica[];
  let probed: FleetReplica[];
  let unprobed: FleetReplica[];
  let prioritized: FleetReplica[];
  let adminToken: string;

  beforeAll(async () => {
    [balanced, weighted, capped, fair, depth, waiting, leaving, probed, unprobed, prioritized] = await Promise.all([
      startReplicas(2, BALANCED_MS),
      startReplicas(2, WEIGHTED_MS),
      startReplicas(2, CAPPED_MS),
      startReplicas(2, FAIR_MS),
      startReplicas(2, DEPTH_MS),
      startReplicas(2, WAIT_MS),
      startReplicas(2, LEAVE_MS),
      startReplicas(2, HEALTH_MS),
      startReplicas(2, HEALTH_MS),
      startReplicas(2, PRIORITY_MS),
    ]);
    const capOne = (replicas: FleetReplica[]) => replicas.map((r) => `      - upstream: ${r.baseUrl}\n        max_concurrent: 1`).join('\n');
    const configYaml = `
models:
  - id: balanced-1
    targets:
      - upstream: ${balanced[0]!.baseUrl}
      - upstream: ${balanced[1]!.baseUrl}
    balance: least_outstanding
  - id: weighted-1
    targets:
      - upstream: ${weighted[0]!.baseUrl}
        weight: 2
      - upstream: ${weighted[1]!.baseUrl}
    balance: weighted_round_robin
  - id: capped-1
    targets:
      - upstream: ${capped[0]!.baseUrl}
        max_concurrent: 2
      - upstream: ${capped[1]!.baseUrl}
        max_concurrent: 2
    queue: { max_wait_ms: 25000, max_depth: 100 }
  - id: fair-1
    targets:
${capOne(fair)}
    queue: { max_wait_ms: 25000, max_depth: 100 }
  - id: depth-1
    endpoints: [chat, messages]
    targets:
${capOne(depth)}
    queue: { max_wait_ms: 25000, max_depth: 2 }
  - id: wait-1
    targets:
${capOne(waiting)}
    queue: { max_wait_ms: 300, max_depth: 100 }
  - id: leave-1
    targets:
${capOne(leaving)}
    queue: { max_wait_ms: 25000, max_depth: 1 }
  - id: probed-1
    targets:
      - upstream: ${probed[0]!.baseUrl}
      - upstream: ${probed[1]!.baseUrl}
    balance: weighted_round_robin
    health: { eject_after_failures: ${EJECT_AFTER}, eject_seconds: ${EJECT_SECONDS}, probe: /health }
  - id: unprobed-1
    targets:
      - upstream: ${unprobed[0]!.baseUrl}
      - upstream: ${unprobed[1]!.baseUrl}
    balance: weighted_round_robin
    health: { eject_after_failures: ${EJECT_AFTER}, eject_seconds: ${EJECT_SECONDS} }
  - id: priority-1
    targets:
${capOne(prioritized)}
    queue: { max_wait_ms: 25000, max_depth: 100 }
defaults:
  rate_limits: { requests_per_minute: 10000, burst_limit: 1000 }
`;
    adminToken = `fleet-admin-${randomBase62(24)}`;
    gateway = await GatewayProcess.start({ env: { NOVA_ADMIN_TOKEN: adminToken, LOG_LEVEL: 'warn' }, configYaml });
  });
  afterAll(async () => {
    await gateway?.stop();
    const all = [balanced, weighted, capped, fair, depth, waiting, leaving, probed, unprobed, prioritized].flat().filter(Boolean);
    await Promise.all(all.map((replica) => replica.close()));
  });

  /** A chat completion whose only message is `marker` (unique per request: how a replica's record names it). */
  async function chat(project: TestProject, model: string, marker: string, signal?: AbortSignal): Promise<Answer> {
    const sent = Date.now();
    const response = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...project.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model, max_tokens: 16, messages: [{ role: 'user', content: marker }] }),
      signal,
    });
    const body = (await response.json()) as Record<string, unknown>;
    const at = Date.now();
    return { status: response.status, headers: response.headers, body, ms: at - sent, at };
  }

  /** The same through Anthropic's Messages API. */
  async function message(project: TestProject, model: string, marker: string): Promise<Answer> {
    const sent = Date.now();
    const response = await fetch(`${gateway.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': project.secret, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model, max_tokens: 16, messages: [{ role: 'user', content: marker }] }),
    });
    const body = (await response.json()) as Record<string, unknown>;
    const at = Date.now();
    return { status: response.status, headers: response.headers, body, ms: at - sent, at };
  }

  /** A key of the project with its own `priority`, made by the project's first key. */
  async function keyWith(project: TestProject, priority: 'high' | 'normal' | 'low'): Promise<TestProject> {
    const response = await fetch(`${gateway.url}/v1/api-keys`, {
      method: 'POST',
      headers: { ...project.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `priority ${priority}`, project_id: project.projectId, priority }),
    });
    const body = (await response.json()) as { id: string; secret: string; priority?: unknown };
    expect(response.status, JSON.stringify(body)).toBe(200);
    expect(body.priority).toBe(priority);
    return { projectId: project.projectId, keyId: body.id, secret: body.secret, auth: { authorization: `Bearer ${body.secret}` } };
  }

  /**
   * `count` concurrent requests of `crowd` on priority-1 (capacity 2), then 200 ms later one of
   * `single`: the single request's answer, and how many of the crowd's were done when it came.
   */
  async function crowdThenOne(crowd: TestProject, single: TestProject, count: number, tag: string) {
    let crowdDone = 0;
    const crowdAnswers = Promise.all(
      Array.from({ length: count }, (_, i) =>
        chat(crowd, 'priority-1', `${tag}-crowd-${i}`).then((answer) => {
          crowdDone++;
          return answer;
        }),
      ),
    );
    await sleep(200);
    const answer = await chat(single, 'priority-1', `${tag}-single`);
    const crowdDoneWhenSingleWas = crowdDone;
    expect(statuses(await crowdAnswers)).toEqual(Array(count).fill(200));
    expect(prioritized.map((r) => r.maxInFlight)).toEqual([1, 1]);
    return { answer, crowdDoneWhenSingleWas };
  }

  const statuses = (answers: Answer[]) => answers.map((a) => a.status);
  const count = (answers: Answer[], status: number) => answers.filter((a) => a.status === status).length;
  const received = (replicas: FleetReplica[], prefix: string) => replicas.map((r) => r.receivedWith(prefix));
  const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

  /** 429 rate_limit_error / upstream_busy with an integer Retry-After of at least 1 s. */
  function expectBusy(answer: Answer): void {
    expect(answer.status, JSON.stringify(answer.body)).toBe(429);
    expect(answer.body.error).toMatchObject({ type: 'rate_limit_error', code: 'upstream_busy' });
    const retryAfter = answer.headers.get('retry-after');
    expect(retryAfter, 'Retry-After').toMatch(/^[0-9]+$/);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
  }

  it('least_outstanding spreads 40 concurrent requests evenly over two targets', async () => {
    const project = await gateway.createProject({ name: 'fleet-balance' });
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => chat(project, 'balanced-1', `balance-${i}`)));
    expect(statuses(answers)).toEqual(Array(40).fill(200));
    const split = received(balanced, 'balance-');
    expect(sum(split)).toBe(40);
    // Even, give or take: 20 each at best.
    for (const n of split) expect(n, `split ${split.join(':')}`).toBeGreaterThanOrEqual(15);
  });

  it('weighted_round_robin with weights 2:1 splits sequential requests 2:1', async () => {
    const project = await gateway.createProject({ name: 'fleet-weights' });
    for (let i = 0; i < 30; i++) expect((await chat(project, 'weighted-1', `weighted-${i}`)).status).toBe(200);
    const [heavy, light] = received(weighted, 'weighted-');
    expect(heavy! + light!).toBe(30);
    expect(heavy, `split ${heavy}:${light}`).toBeGreaterThanOrEqual(19);
    expect(heavy, `split ${heavy}:${light}`).toBeLessThanOrEqual(21);
  });

  it('max_concurrent 2 per target: 20 concurrent requests never put more than 2 on a target, and all complete from the queue', async () => {
    const project = await gateway.createProject({ name: 'fleet-cap' });
    for (const replica of capped) replica.reset();
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(project, 'capped-1', `capped-${i}`)));
    expect(statuses(answers)).toEqual(Array(20).fill(200));
    expect(sum(received(capped, 'capped-'))).toBe(20);
    // The cap is held, and used: each target ran 2 at a time.
    expect(capped.map((r) => r.maxInFlight)).toEqual([2, 2]);
    // 20 requests, 4 at a time, 200 ms each: at least 5 service times for the last.
    expect(Math.max(...answers.map((a) => a.ms))).toBeGreaterThanOrEqual(5 * CAPPED_MS * 0.9);
  });

  it("the queue is fair across projects: one project's 40 queued requests do not hold back another's one", async () => {
    const heavy = await gateway.createProject({ name: 'fleet-fair-H' });
    const light = await gateway.createProject({ name: 'fleet-fair-L' });
    let heavyDone = 0;
    const heavyAnswers = Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        chat(heavy, 'fair-1', `fair-H-${i}`).then((answer) => {
          heavyDone++;
          return answer;
        }),
      ),
    );
    await sleep(200);
    const lightAnswer = await chat(light, 'fair-1', 'fair-L');
    const heavyDoneWhenLightWas = heavyDone;
    expect(lightAnswer.status, JSON.stringify(lightAnswer.body)).toBe(200);
    // Capacity 2, 250 ms a request: fair, L waits for one of the two slots (about 1-2 service
    // times); first in, first out it would wait behind 38 of H's (about 19 service times).
    expect(lightAnswer.ms, `L answered after ${lightAnswer.ms} ms, when ${heavyDoneWhenLightWas} of H's 40 were done`).toBeLessThan(5 * FAIR_MS);
    expect(heavyDoneWhenLightWas, "H's requests were still in progress").toBeLessThan(20);
    const heavyResults = await heavyAnswers;
    expect(statuses(heavyResults)).toEqual(Array(40).fill(200));
    expect(fair.map((r) => r.maxInFlight)).toEqual([1, 1]);
    expect(sum(received(fair, 'fair-L'))).toBe(1);
  }, 45_000);

  it('past max_depth: 429 rate_limit_error / upstream_busy with Retry-After, at once; the upstream never sees those', async () => {
    const project = await gateway.createProject({ name: 'fleet-depth' });
    // Capacity 2 (two targets, one each) and a queue of 2: 4 of 8 are taken.
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => chat(project, 'depth-1', `depth-chat-${i}`)));
    expect(count(answers, 200), JSON.stringify(statuses(answers))).toBe(4);
    const refused = answers.filter((a) => a.status !== 200);
    expect(refused).toHaveLength(4);
    for (const answer of refused) {
      expectBusy(answer);
      // Refused at once, not after a wait for a slot.
      expect(answer.ms).toBeLessThan(DEPTH_MS);
    }
    expect(sum(received(depth, 'depth-chat-'))).toBe(4);
  }, 20_000);

  it('past max_depth on /v1/messages: 529 overloaded_error with Retry-After', async () => {
    const project = await gateway.createProject({ name: 'fleet-depth-messages' });
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => message(project, 'depth-1', `depth-messages-${i}`)));
    expect(count(answers, 200), JSON.stringify(answers.map((a) => [a.status, a.body]))).toBe(4);
    const refused = answers.filter((a) => a.status !== 200);
    expect(refused).toHaveLength(4);
    for (const answer of refused) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(529);
      expect(answer.body).toMatchObject({ type: 'error', error: { type: 'overloaded_error' } });
      const retryAfter = answer.headers.get('retry-after');
      expect(retryAfter, 'Retry-After').toMatch(/^[0-9]+$/);
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    }
    expect(sum(received(depth, 'depth-messages-'))).toBe(4);
  }, 20_000);

  it('past max_wait_ms: 429 rate_limit_error / upstream_busy with Retry-After; the upstream never sees it', async () => {
    const project = await gateway.createProject({ name: 'fleet-wait' });
    const fill = [chat(project, 'wait-1', 'wait-fill-0'), chat(project, 'wait-1', 'wait-fill-1')];
    await Promise.all(waiting.map((r) => r.waitFor((x) => x.receivedWith('wait-fill-') === 1, 5000, 'a fill request in flight')));
    const late = await chat(project, 'wait-1', 'wait-late');
    expectBusy(late);
    // It waited max_wait_ms (300) and no longer: the slots free only 1.5 s after the fill began.
    expect(late.ms).toBeGreaterThanOrEqual(280);
    expect(late.ms).toBeLessThan(1200);
    expect(statuses(await Promise.all(fill))).toEqual([200, 200]);
    await sleep(200);
    expect(sum(received(waiting, 'wait-late'))).toBe(0);
  }, 20_000);

  it('a client that leaves while queued frees its place, and the upstream never sees its request', async () => {
    const project = await gateway.createProject({ name: 'fleet-leave' });
    // Capacity 2 (both busy for 1.5 s), queue depth 1.
    const fill = [chat(project, 'leave-1', 'leave-fill-0'), chat(project, 'leave-1', 'leave-fill-1')];
    await Promise.all(leaving.map((r) => r.waitFor((x) => x.receivedWith('leave-fill-') === 1, 5000, 'a fill request in flight')));
    const controller = new AbortController();
    const gone = chat(project, 'leave-1', 'leave-gone', controller.signal).catch((error: unknown) => error);
    await sleep(200);
    // The queue is full: its one place is the queued request's.
    expectBusy(await chat(project, 'leave-1', 'leave-over'));
    controller.abort();
    expect(await gone).toBeInstanceOf(Error);
    await sleep(200);
    // Its place is free: a later request is queued (depth 1 would refuse it otherwise) and served.
    const later = await chat(project, 'leave-1', 'leave-later');
    expect(later.status, JSON.stringify(later.body)).toBe(200);
    expect(statuses(await Promise.all(fill))).toEqual([200, 200]);
    // Served at the first free slot (about 2.5 s after it was sent), not after one more service time for the gone one (4 s).
    expect(later.ms).toBeLessThan(2.4 * LEAVE_MS);
    await sleep(LEAVE_MS + 300);
    expect(received(leaving, 'leave-gone'), 'requests of the client that left').toEqual([0, 0]);
    expect(sum(received(leaving, 'leave-over'))).toBe(0);
    expect(sum(received(leaving, 'leave-later'))).toBe(1);
  }, 20_000);

  it('health with a probe: a target answering 500 is ejected after 3 failures, kept out while its probe fails, and put back when it answers', async () => {
    const project = await gateway.createProject({ name: 'fleet-health-probe' });
    const [sick, well] = probed as [FleetReplica, FleetReplica];
    for (let i = 0; i < 4; i++) expect((await chat(project, 'probed-1', `probe-warm-${i}`)).status).toBe(200);
    expect(sick.receivedWith('probe-warm-'), 'both targets serve before the failure').toBeGreaterThan(0);

    sick.fail();
    sick.reset();
    well.reset();
    // Failing for 5 s: more than twice eject_seconds, so the target is probed (and fails the probe) on the way.
    const failing: Answer[] = [];
    const failUntil = Date.now() + 2.5 * EJECT_SECONDS * 1000;
    for (let i = 0; Date.now() < failUntil; i++) failing.push(await chat(project, 'probed-1', `probe-fail-${i}`));
    const errors = failing.filter((a) => a.status !== 200);
    expect(errors.length, `errors: ${JSON.stringify(errors.map((a) => [a.status, a.body]))}`).toBeLessThanOrEqual(EJECT_AFTER);
    expect(sick.receivedWith('probe-fail-'), 'chat requests the failing target got').toBe(EJECT_AFTER);
    expect(sick.healthChecks, 'probes of the failing target').toBeGreaterThanOrEqual(1);
    expect(well.receivedWith('probe-fail-')).toBeGreaterThanOrEqual(failing.length - EJECT_AFTER);

    sick.recover();
    const back: Answer[] = [];
    const backBy = Date.now() + EJECT_SECONDS * 1000 + 4000;
    for (let i = 0; sick.receivedWith('probe-back-') === 0 && Date.now() < backBy; i++) back.push(await chat(project, 'probed-1', `probe-back-${i}`));
    expect(sick.receivedWith('probe-back-'), 'the recovered target gets traffic again within eject_seconds + 4 s').toBeGreaterThan(0);
    expect(sick.healthChecks, 'it was probed back').toBeGreaterThanOrEqual(2);
    expect(back.filter((a) => a.status !== 200)).toEqual([]);
    // Back in the rotation: its share of 10 more.
    for (let i = 0; i < 10; i++) expect((await chat(project, 'probed-1', `probe-after-${i}`)).status).toBe(200);
    expect(sick.receivedWith('probe-after-')).toBeGreaterThanOrEqual(3);
  }, 40_000);

  it('health without a probe: a target refusing connections is ejected after 3 failures, gets nothing for eject_seconds, then the next request brings it back', async () => {
    const project = await gateway.createProject({ name: 'fleet-health-next' });
    const [sick, well] = unprobed as [FleetReplica, FleetReplica];
    for (let i = 0; i < 4; i++) expect((await chat(project, 'unprobed-1', `next-warm-${i}`)).status).toBe(200);
    expect(sick.receivedWith('next-warm-'), 'both targets serve before the failure').toBeGreaterThan(0);

    const refusedAt = Date.now();
    await sick.refuse();
    sick.reset();
    well.reset();
    // 8 sequential requests or more, for 1 s: the target is picked for every other one, and is ejected after 3.
    const answers: Answer[] = [];
    while (answers.length < 8 || Date.now() < refusedAt + 1000) answers.push(await chat(project, 'unprobed-1', `next-down-${answers.length}`));
    // It is up again, but ejected until at least 2 s after the refusal began (its third failure came later).
    await sick.recover();
    const until = Date.now() + EJECT_SECONDS * 1000 + 4000;
    while (sick.received === 0 && Date.now() < until) answers.push(await chat(project, 'unprobed-1', `next-up-${answers.length}`));
    const errors = answers.filter((a) => a.status !== 200);
    expect(errors.length, `errors: ${JSON.stringify(errors.map((a) => [a.status, a.body]))}`).toBeLessThanOrEqual(EJECT_AFTER);
    expect(sick.received, 'the recovered target gets traffic again').toBeGreaterThan(0);
    const firstBack = sick.requests[0]!.receivedAt;
    expect(firstBack - refusedAt, 'no traffic while ejected').toBeGreaterThanOrEqual(EJECT_SECONDS * 1000 - 100);
    expect(well.received).toBeGreaterThan(0);
    for (let i = 0; i < 10; i++) expect((await chat(project, 'unprobed-1', `next-after-${i}`)).status).toBe(200);
    expect(sick.receivedWith('next-after-')).toBeGreaterThanOrEqual(3);
  }, 40_000);

  it("priority: a high key's request goes ahead of a low key's queued requests of the same project", async () => {
    const project = await gateway.createProject({ name: 'fleet-priority-high' });
    const [low, high] = [await keyWith(project, 'low'), await keyWith(project, 'high')];
    const { answer, crowdDoneWhenSingleWas } = await crowdThenOne(low, high, 30, 'prio-high');
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    // Ahead of the low ones: within a few service times; in line with them it would wait about 15.
    expect(answer.ms, `high answered after ${answer.ms} ms, when ${crowdDoneWhenSingleWas} of 30 low were done`).toBeLessThan(5 * PRIORITY_MS);
    expect(crowdDoneWhenSingleWas, 'low requests were still in progress').toBeLessThan(15);
  }, 30_000);

  it('priority: low is never starved, its request is served while high ones keep waiting', async () => {
    const project = await gateway.createProject({ name: 'fleet-priority-low' });
    const [high, low] = [await keyWith(project, 'high'), await keyWith(project, 'low')];
    const { answer, crowdDoneWhenSingleWas } = await crowdThenOne(high, low, 40, 'prio-low');
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    // Strictly after every high request it would come when 38 or more were done.
    expect(crowdDoneWhenSingleWas, `low answered after ${answer.ms} ms, when ${crowdDoneWhenSingleWas} of 40 high were done`).toBeLessThan(30);
  }, 30_000);

  it("priority: a key without its own follows its project's (set by the admin)", async () => {
    const project = await gateway.createProject({ name: 'fleet-priority-project' });
    const patched = await fetch(`${gateway.url}/admin/v1/projects/${project.projectId}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ priority: 'low' }),
    });
    expect(patched.status, await patched.clone().text()).toBe(200);
    expect(((await patched.json()) as { priority?: unknown }).priority).toBe('low');
    const normal = await keyWith(project, 'normal');
    // The project's first key has no priority of its own: it waits as the project's, low.
    const { answer, crowdDoneWhenSingleWas } = await crowdThenOne(project, normal, 30, 'prio-project');
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.ms, `normal answered after ${answer.ms} ms, when ${crowdDoneWhenSingleWas} of 30 were done`).toBeLessThan(5 * PRIORITY_MS);
    expect(crowdDoneWhenSingleWas, "the project's key's requests were still in progress").toBeLessThan(15);
  }, 30_000);
});
