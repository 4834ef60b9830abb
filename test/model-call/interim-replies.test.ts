import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { buildTestApp, createProject, type TestApp, type TestProject } from '../support/test-app.js';

const COMPLETION = { id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'after the hints' }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 } };

/** An upstream that sends interim replies (103 Early Hints, 102 Processing) before its answer. */
describe('interim replies from an upstream', () => {
  let upstream: Server;
  let t: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    upstream = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        if (request.url?.startsWith('/processing/')) response.writeProcessing();
        else response.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify(COMPLETION));
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    t = await buildTestApp('memory', {
      config: defaultConfig({
        models: [
          { id: 'hints-1', upstream: `${base}/hints/v1` },
          { id: 'processing-1', upstream: `${base}/processing/v1` },
        ],
      }),
    });
    project = await createProject(t.app);
  });
  afterAll(async () => {
    await t?.close();
    await new Promise((resolve) => upstream?.close(resolve));
  });

  it.each(['hints-1', 'processing-1'])('answers with the final reply, not the interim one (%s)', async (model) => {
    const response = await t.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: project.auth, payload: { model, messages: [{ role: 'user', content: 'hi' }] } });
    expect(response.statusCode).toBe(200);
    const body = response.json() as { choices: Array<{ message: { content: string } }>; usage: { prompt_tokens: number } };
    expect(body.choices[0]!.message.content).toBe('after the hints');
    expect(body.usage.prompt_tokens).toBe(3);
  });
});
