import { describe, expect, it } from 'vitest';
import { FairQueue } from '../../src/model-call/fair-queue.js';
import { CallSignal } from '../../src/model-call/call-signal.js';
import { TargetFleet, type FleetSettings, type TargetLease } from '../../src/model-call/target-fleet.js';
import { ClientGone } from '../../src/model-call/upstream-errors.js';

const SETTINGS: FleetSettings = { balance: 'least_outstanding', ejectAfterFailures: 3, ejectMs: 60_000, probe: null, maxWaitMs: 10_000, maxDepth: 100 };
const ticket = (projectId: string, priority: 'high' | 'normal' | 'low' = 'normal') => ({ projectId, priority });

function fleet(targets: Array<{ label: string; weight?: number; maxConcurrent?: number }>, settings: Partial<FleetSettings> = {}) {
  return new TargetFleet(
    'm',
    targets.map(({ label, weight, maxConcurrent }) => ({ target: { label }, weight: weight ?? 1, maxConcurrent: maxConcurrent ?? null })),
    { ...SETTINGS, ...settings },
    null,
    async () => true,
  );
}
const first = (f: TargetFleet<{ label: string }>, projectId = 'p', priority?: 'high' | 'normal' | 'low', signal = new CallSignal()) =>
  f.acquire(ticket(projectId, priority), new Set(), signal, false) as Promise<TargetLease<{ label: string }>>;

describe('fair queue', () => {
  it('serves projects in turn, whatever one of them has waiting', () => {
    const queue = new FairQueue<string>();
    for (let i = 0; i < 5; i++) queue.push('H', 'normal', `h${i}`);
    queue.push('L', 'normal', 'l0');
    expect([queue.shift(), queue.shift(), queue.shift()]).toContain('l0');
  });

  it('serves high first and low never starves', () => {
    const queue = new FairQueue<string>();
    for (let i = 0; i < 20; i++) queue.push('p', 'high', `h${i}`);
    for (let i = 0; i < 3; i++) queue.push('p', 'normal', `n${i}`);
    queue.push('p', 'low', 'l0');
    const order = Array.from({ length: 7 }, () => queue.shift());
    expect(order.filter((item) => item!.startsWith('h')).length).toBe(4);
    expect(order).toContain('l0');
    expect(queue.remove('p', 'high', 'h19')).toBe(true);
    expect(queue.size).toBe(20 + 3 + 1 - 7 - 1);
  });
});

describe('target fleet', () => {
  it('balances by least outstanding, and by weight under weighted round robin', async () => {
    const even = fleet([{ label: 'a' }, { label: 'b' }]);
    const leases = await Promise.all(Array.from({ length: 40 }, () => first(even)));
    expect(leases.filter((lease) => lease.target.label === 'a')).toHaveLength(20);
    const weighted = fleet([{ label: 'a', weight: 2 }, { label: 'b' }], { balance: 'weighted_round_robin' });
    const picks: string[] = [];
    for (let i = 0; i < 30; i++) {
      const lease = await first(weighted);
      picks.push(lease.target.label);
      lease.release(false);
    }
    expect(picks.filter((label) => label === 'a')).toHaveLength(20);
  });

  it('holds requests past max_concurrent in the queue and serves them as room frees, fairly across projects', async () => {
    const f = fleet([{ label: 'a', maxConcurrent: 1 }]);
    const running = await first(f, 'H');
    const served: string[] = [];
    const waiting = [...Array.from({ length: 5 }, () => 'H'), 'L'].map((project) =>
      first(f, project).then((lease) => {
        served.push(project);
        lease.release(false);
      }),
    );
    running.release(false);
    await Promise.all(waiting);
    expect(served).toHaveLength(6);
    // L joined behind five of H's: it is served in the second turn, not the sixth (first come, first served).
    expect(served.indexOf('L')).toBeLessThanOrEqual(1);
  });

  it('refuses past max_depth and max_wait_ms with upstream_busy, and frees the place of a client that leaves', async () => {
    const f = fleet([{ label: 'a', maxConcurrent: 1 }], { maxDepth: 1, maxWaitMs: 50 });
    const running = await first(f);
    const signal = new CallSignal();
    const leaving = first(f, 'p', 'normal', signal);
    await expect(first(f)).rejects.toMatchObject({ statusCode: 429, code: 'upstream_busy', headers: { 'retry-after': '1' } });
    signal.abort(new ClientGone());
    await expect(leaving).rejects.toBeInstanceOf(ClientGone);
    // Its place is free at once: the next one waits, then times out.
    await expect(first(f)).rejects.toMatchObject({ code: 'upstream_busy', message: expect.stringContaining('max_wait_ms') });
    running.release(false);
    (await first(f)).release(false);
  });

  it('ejects a target after its failures in a row, and puts it back when a trial request succeeds', async () => {
    const f = fleet([{ label: 'a' }, { label: 'b' }], { ejectMs: 30 });
    // A long request on a, sent before the failures: its success later tells nothing of a's health now.
    const old = (await f.acquire(ticket('p'), new Set([1]), new CallSignal(), false))!;
    for (let i = 0; i < 3; i++) {
      const tried = new Set<number>([1]);
      const lease = (await f.acquire(ticket('p'), tried, new CallSignal(), false))!;
      expect(lease.target.label).toBe('a');
      lease.release(true);
    }
    old.release(false);
    // Ejected: everything goes to b.
    const labels = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const lease = await first(f);
      labels.add(lease.target.label);
      lease.release(false);
    }
    expect([...labels]).toEqual(['b']);
    await new Promise((resolve) => setTimeout(resolve, 40));
    const back = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const lease = await first(f);
      back.add(lease.target.label);
      lease.release(false);
    }
    expect(back).toEqual(new Set(['a', 'b']));
  });
});
