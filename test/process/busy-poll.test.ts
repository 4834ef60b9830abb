import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { BusyPoll, WaitPace } from '../../src/busy-poll.js';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { FakeUpstream } from '../support/fake-upstream.js';
import { buildTestApp, createProject } from '../support/test-app.js';
import type { HttpTarget } from '../../src/upstream/model-registry.js';

describe('BusyPoll', () => {
  it('polls while a wait is held, and stops once it is released', async () => {
    const stretches: number[] = [];
    const poll = new BusyPoll(200_000, (seconds) => stretches.push(seconds));
    const wait = poll.hold(new WaitPace());
    await sleep(20);
    expect(stretches).toEqual([]); // still polling
    poll.release(wait);
    await sleep(20);
    expect(stretches).toHaveLength(1);
    // It polled through the whole wait (the timer), and ended soon after the release.
    expect(stretches[0]).toBeGreaterThanOrEqual(0.019);
    expect(stretches[0]).toBeLessThan(0.2);
  });

  it('polls at most its budget after the latest wait began', async () => {
    const stretches: number[] = [];
    const poll = new BusyPoll(5_000, (seconds) => stretches.push(seconds));
    const wait = poll.hold(new WaitPace());
    await sleep(40);
    expect(stretches).toHaveLength(1);
    expect(stretches[0]).toBeGreaterThanOrEqual(0.005);
    expect(stretches[0]).toBeLessThan(0.039);
    poll.release(wait);
  });

  it('stops polling a kind of wait that usually outlasts the budget, and polls it again once it is fast', async () => {
    const stretches: number[] = [];
    const poll = new BusyPoll(2_000, (seconds) => stretches.push(seconds));
    const slow = new WaitPace();
    // Waits of 6 ms against a 2 ms budget: each is polled for its first 2 ms, until fewer than
    // half of the recent ones ended within the budget (11 such waits at a weight of 1/16).
    let polledWaits = 0;
    for (let n = 0; n < 14; n++) {
      const before = stretches.length;
      const wait = poll.hold(slow);
      await sleep(6);
      poll.release(wait);
      await sleep(1);
      if (stretches.length > before) polledWaits++;
    }
    expect(polledWaits).toBe(11);
    expect(slow.shortShare).toBeLessThan(0.5);
    // Another kind of wait is still polled meanwhile.
    const other = poll.hold(new WaitPace());
    await sleep(1);
    poll.release(other);
    await sleep(1);
    expect(stretches).toHaveLength(12);
    // The slow kind's waits, fast now (released at once, unpolled), bring its share back up.
    for (let n = 0; n < 3; n++) poll.release(poll.hold(slow));
    expect(slow.shortShare).toBeGreaterThanOrEqual(0.5);
    const again = poll.hold(slow);
    poll.release(again);
    expect(again.polled).toBe(true);
  });

  it('does nothing when off (0)', async () => {
    const stretches: number[] = [];
    const poll = new BusyPoll(0, (seconds) => stretches.push(seconds));
    const pace = new WaitPace();
    poll.release(poll.hold(pace));
    const wait = poll.hold(pace);
    await sleep(10);
    poll.release(wait);
    expect(pace.shortShare).toBe(1);
    await sleep(5);
    expect(stretches).toEqual([]);
  });
});

describe('server.busy_poll_us', () => {
  it('polls while a chat completion waits for its admission, and is counted', async () => {
    const config = defaultConfig({ models: [{ id: 'echo-1', provider: 'echo' }], server: { busy_poll_us: 2_000 } });
    const t = await buildTestApp('memory', { config });
    try {
      const { secret } = await createProject(t.app);
      const response = await t.app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        headers: { authorization: `Bearer ${secret}` },
        payload: { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] },
      });
      expect(response.statusCode).toBe(200);
      await sleep(10);
      const polled = (await t.ctx.metrics.busyPollSeconds.get()).values[0]?.value ?? 0;
      expect(polled).toBeGreaterThan(0);
    } finally {
      await t.close();
    }
  });

  it('follows each upstream: one that answers past the budget stops being polled, a fast one stays polled', async () => {
    const upstream = await FakeUpstream.start({ slow: { latencyMs: 8 }, fast: {} });
    const config = defaultConfig({
      models: [
        { id: 'slow-1', upstream: upstream.baseUrl('slow') },
        { id: 'fast-1', upstream: upstream.baseUrl('fast') },
      ],
      server: { busy_poll_us: 2_000 },
    });
    const t = await buildTestApp('memory', { config });
    try {
      const { secret } = await createProject(t.app);
      const call = async (model: string) => {
        const response = await t.app.inject({
          method: 'POST',
          url: '/v1/chat/completions',
          headers: { authorization: `Bearer ${secret}` },
          payload: { model, messages: [{ role: 'user', content: 'hi' }] },
        });
        expect(response.statusCode).toBe(200);
      };
      for (let n = 0; n < 12; n++) await call('slow-1');
      for (let n = 0; n < 12; n++) await call('fast-1');
      const pace = (model: string) => (t.ctx.models.get(model)!.targets[0] as HttpTarget).headersPace.shortShare;
      expect(pace('slow-1')).toBeLessThan(0.5);
      expect(pace('fast-1')).toBeGreaterThan(0.5);
    } finally {
      await t.close();
      await upstream.close();
    }
  });
});
