import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { BusyPoll } from '../../src/busy-poll.js';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { buildTestApp, createProject } from '../support/test-app.js';

describe('BusyPoll', () => {
  it('polls while a wait is held, and stops once it is released', async () => {
    const stretches: number[] = [];
    const poll = new BusyPoll(200_000, (seconds) => stretches.push(seconds));
    poll.hold();
    await sleep(20);
    expect(stretches).toEqual([]); // still polling
    poll.release();
    await sleep(20);
    expect(stretches).toHaveLength(1);
    // It polled through the whole wait (the timer), and ended soon after the release.
    expect(stretches[0]).toBeGreaterThanOrEqual(0.019);
    expect(stretches[0]).toBeLessThan(0.2);
  });

  it('polls at most its budget after the latest wait began', async () => {
    const stretches: number[] = [];
    const poll = new BusyPoll(5_000, (seconds) => stretches.push(seconds));
    poll.hold();
    await sleep(40);
    expect(stretches).toHaveLength(1);
    expect(stretches[0]).toBeGreaterThanOrEqual(0.005);
    expect(stretches[0]).toBeLessThan(0.039);
    poll.release();
  });

  it('does nothing when off (0)', async () => {
    const stretches: number[] = [];
    const poll = new BusyPoll(0, (seconds) => stretches.push(seconds));
    poll.hold();
    await sleep(10);
    poll.release();
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
});
