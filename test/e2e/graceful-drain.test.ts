import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { GatewayProcess } from '../support/gateway-process.js';

const ADMIN_TOKEN = `drain-admin-${randomBase62(24)}`;
const WORDS = ['one', ' two', ' three', ' four', ' five', ' six', ' seven', ' eight'];

/** SIGTERM during a slow stream: the stream completes, new requests get 503, the process exits 0. */
describe('graceful drain of the real process', () => {
  let upstream: LoopbackUpstream;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({ slow: { chunks: WORDS, chunkDelayMs: 250 } });
    gateway = await GatewayProcess.start({
      env: { NOVA_ADMIN_TOKEN: ADMIN_TOKEN, NOVA_DRAIN_TIMEOUT_MS: '15000' },
      configYaml: `
models:
  - id: slow-model
    upstream: ${upstream.baseUrl('slow')}
`,
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  it('finishes the in-flight stream intact, refuses new work, and exits 0', async () => {
    const project = await gateway.createProject({ name: 'drain' });
    const auth = { ...project.auth, 'content-type': 'application/json' };

    const stream = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ model: 'slow-model', stream: true, messages: [{ role: 'user', content: 'count' }] }),
    });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    const decoder = new TextDecoder();
    let received = '';
    // Wait for the first chunk, then ask the process to stop.
    while (!received.includes('"content"')) received += decoder.decode((await reader.read()).value, { stream: true });
    gateway.signal('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 200));

    const ready = await fetch(`${gateway.url}/readyz`);
    expect(ready.status).toBe(503);
    const refused = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ model: 'slow-model', messages: [{ role: 'user', content: 'late' }] }),
    });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('shutting_down');

    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      received += decoder.decode(value, { stream: true });
    }
    const events = received.split('\n').filter((line) => line.startsWith('data: '));
    expect(events.at(-1)).toBe('data: [DONE]');
    const text = events
      .slice(0, -1)
      .map((line) => JSON.parse(line.slice(6)) as { choices: Array<{ delta?: { content?: string } }> })
      .map((chunk) => chunk.choices[0]?.delta?.content ?? '')
      .join('');
    expect(text).toBe(WORDS.join(''));
    expect(await gateway.waitForExit()).toBe(0);
    expect(gateway.logs.some((line) => line.includes('"msg":"draining"'))).toBe(true);
  });
});
