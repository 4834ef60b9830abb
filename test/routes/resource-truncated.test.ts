import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { buildTestApp, createProject, errorOf, type TestApp, type TestProject } from '../support/test-app.js';

/**
 * An upstream reply to a resource call (images, speech, fine-tuning) that breaks off after its
 * headers is a reply the gateway cannot read: 502 `upstream_error`, as on the chat path
 * (test/routes/chat-abort.test.ts), not 503 `upstream_unavailable`.
 */
describe('resource replies cut short', () => {
  let upstream: LoopbackUpstream;
  let t: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    // Part of a JSON object, then the connection is cut.
    upstream = await LoopbackUpstream.start({ cut: { body: '{"data":[{"url":"https://images.example/0.png"', afterBody: 'cut' } });
    const config = defaultConfig({
      models: [
        { id: 'painter', upstream: upstream.baseUrl('cut'), endpoints: ['images'] },
        { id: 'voice', upstream: upstream.baseUrl('cut'), endpoints: ['audio'] },
        { id: 'tuner', upstream: upstream.baseUrl('cut'), endpoints: ['fine_tuning'] },
      ],
    });
    t = await buildTestApp('memory', { config });
    project = await createProject(t.app);
  });
  afterAll(async () => {
    await t.close();
    await upstream.close();
  });

  it.each([
    ['/v1/images/generations', { model: 'painter', prompt: 'a cat' }],
    ['/v1/audio/speech', { model: 'voice', input: 'hi', voice: 'alloy' }],
    ['/v1/fine_tuning/jobs', { model: 'tuner', training_file: 'file-1' }],
  ])('%s answers 502 upstream_error', async (url, payload) => {
    const response = await t.app.inject({ method: 'POST', url, headers: project.auth, payload });
    expect(errorOf(response)).toMatchObject({ status: 502, type: 'upstream_error', code: 'upstream_error' });
  });
});
