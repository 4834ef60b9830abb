import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayProcess } from '../support/gateway-process.js';
import { KeyLimitReplicas, type OpenStream } from '../support/key-limit-replicas.js';
import { RedisCluster } from '../support/redis-cluster.js';
import type { TestProject } from '../support/test-app.js';

/** Short, so that a dead replica's leases run out within the test; renewed every third of it. */
const LEASE_TTL_S = 6;

/**
 * Issue 32's acceptance on a 3-master Redis Cluster (REDIS_MODE=cluster): two real gateway
 * processes, a key's own limits exact across them, both levels in one admission, and the
 * concurrency leases of a SIGKILLed replica freed by their TTL at the key level and the project's.
 */
describe('key limits: two processes on Redis Cluster', () => {
  let cluster: RedisCluster;
  let rig: KeyLimitReplicas;

  beforeAll(async () => {
    cluster = await RedisCluster.start();
    rig = await KeyLimitReplicas.start({ redisUrl: cluster.url, redisMode: 'cluster', rateLimits: [`lease_ttl_seconds: ${LEASE_TTL_S}`] });
  });
  afterAll(async () => {
    await rig?.stop();
    await cluster?.stop();
  });

  /** Opens streams of `key` through `gateway` every 250 ms until one is admitted or `timeoutMs` pass. */
  async function openWhenFree(gateway: GatewayProcess, key: TestProject, timeoutMs: number): Promise<OpenStream | null> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const stream = await rig.openStream(gateway, key);
      if (stream.status === 200) return stream;
      expect(stream.status).toBe(429);
      await sleep(250);
    }
    return null;
  }

  it("a key's requests_per_minute admits exactly that many over both replicas; the project is charged only those", async () => {
    const project = await rig.project({ requests_per_minute: 100, burst_limit: 0 });
    const key = await rig.key(project, { rate_limits: { requests_per_minute: 4 } });
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => rig.chat(rig.at(i), key)));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(4);
    const refused = answers.filter((r) => r.status === 429);
    expect(refused).toHaveLength(8);
    for (const r of refused) {
      expect(r.scope).toBe('key');
      expect(r.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
      expect(r.body.error!.message).toContain(`this API key (${key.keyId})`);
      expect(r.headers.get('x-ratelimit-limit-requests')).toBe('4');
    }
    // The project's window holds the 4 admitted, not the 8 refused: the project's own key sees 95 left.
    const root = await rig.chat(rig.b, project);
    expect(root.status).toBe(200);
    expect(root.headers.get('x-ratelimit-remaining-requests')).toBe(String(100 - 5));
  });

  it("a key's max_concurrent_requests holds exactly across replicas, and a freed slot is taken on the other one", async () => {
    const project = await rig.project({ requests_per_minute: 1000, burst_limit: 0 });
    const key = await rig.key(project, { rate_limits: { max_concurrent_requests: 2 } });
    const streams = await Promise.all(Array.from({ length: 6 }, (_, i) => rig.openStream(rig.at(i), key)));
    const open = streams.filter((s) => s.status === 200);
    try {
      expect(open).toHaveLength(2);
      for (const busy of streams.filter((s) => s.status !== 200)) {
        expect(busy.status).toBe(429);
        expect(busy.response.headers.get('x-ratelimit-scope')).toBe('key');
        expect(await KeyLimitReplicas.errorOf(busy)).toMatchObject({ code: 'concurrency_limit_exceeded' });
      }
      // The project's other keys are not held back by this key's slots.
      expect((await rig.chat(rig.a, project)).status).toBe(200);
      // One slot freed on whichever replica held it: exactly one more is admitted, through the other.
      const freedOn = streams.indexOf(open[0]!) % 2;
      open.shift()!.abort();
      const reopened = await openWhenFree(rig.at(freedOn + 1), key, 15_000);
      expect(reopened?.status).toBe(200);
      open.push(reopened!);
      const third = await rig.openStream(rig.at(freedOn), key);
      open.push(third);
      expect(third.status).toBe(429);
      expect(third.response.headers.get('x-ratelimit-scope')).toBe('key');
    } finally {
      for (const s of open) s.abort();
    }
  });

  it('both levels together: the project admits its limit over two keys, each key at most its own', async () => {
    const project = await rig.project({ requests_per_minute: 5, burst_limit: 0 });
    const one = await rig.key(project, { rate_limits: { requests_per_minute: 3 } });
    const two = await rig.key(project, { rate_limits: { requests_per_minute: 3 } });
    const keyOf = (i: number) => (i % 4 < 2 ? 0 : 1);
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => rig.chat(rig.at(i), keyOf(i) === 0 ? one : two)));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(5);
    const admittedOf = (k: number) => answers.filter((r, i) => r.status === 200 && keyOf(i) === k).length;
    // 5 in all, at most 3 each: one key has 3, the other 2.
    expect([admittedOf(0), admittedOf(1)].sort()).toEqual([2, 3]);
    const refused = answers.filter((r) => r.status !== 200);
    expect(refused.every((r) => r.status === 429 && (r.scope === 'key' || r.scope === 'project'))).toBe(true);
    expect(refused.some((r) => r.scope === 'project')).toBe(true);
  });

  // Last: it kills replica a.
  it("a SIGKILLed replica's key-level and project-level leases free after the lease TTL, and the other replica admits again", async () => {
    // The key's own cap binds in one project, the project's cap (under a key with limits of its own) in the other.
    const keyCapped = await rig.key(await rig.project({ requests_per_minute: 1000, burst_limit: 0 }), { rate_limits: { max_concurrent_requests: 2 } });
    const projectCapped = await rig.key(await rig.project({ requests_per_minute: 1000, burst_limit: 0, max_concurrent_requests: 2 }), {
      rate_limits: { max_concurrent_requests: 5 },
    });
    const { a, b } = rig;
    // Replica a holds both slots of each.
    const held = [];
    for (const key of [keyCapped, keyCapped, projectCapped, projectCapped]) held.push(await rig.openStream(a, key));
    expect(held.map((s) => s.status)).toEqual([200, 200, 200, 200]);
    /** What replica b answers a new stream of each key: the status and the level that refused. */
    const onB = async () => {
      const answers = [];
      for (const key of [keyCapped, projectCapped]) {
        const stream = await rig.openStream(b, key);
        stream.abort();
        answers.push(`${stream.status} ${stream.response.headers.get('x-ratelimit-scope')}`);
      }
      return answers;
    };
    const full = ['429 key', '429 project'];
    expect(await onB()).toEqual(full);
    // A live replica renews its leases: past the TTL they still hold, at both levels.
    await sleep(LEASE_TTL_S * 1000 + 1000);
    expect(await onB()).toEqual(full);

    a.signal('SIGKILL');
    await a.waitForExit();
    const killedAt = Date.now();
    // Renewed at most a third of the TTL ago: the dead replica's leases still hold for a while…
    expect(await onB()).toEqual(full);
    // …and then free themselves, with no replica releasing them: both slots of each, and no more.
    const reopened = [await openWhenFree(b, keyCapped, 30_000)];
    const freedAfterMs = Date.now() - killedAt;
    console.info(`cluster: slots of the SIGKILLed replica freed after ${freedAfterMs} ms (lease TTL ${LEASE_TTL_S} s)`);
    try {
      expect(reopened[0]?.status).toBe(200);
      for (const key of [keyCapped, projectCapped, projectCapped]) reopened.push(await rig.openStream(b, key));
      expect(reopened.map((s) => s?.status)).toEqual([200, 200, 200, 200]);
      expect(await onB()).toEqual(full);
    } finally {
      for (const s of reopened) s?.abort();
    }
  }, 90_000);
});
