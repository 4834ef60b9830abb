import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { buildTestApp, createProject, type TestApp, type TestProject } from '../support/test-app.js';
import { silentWav } from '../support/wav.js';

const MODEL_RPM = 777;
const MANAGEMENT_RPM = 555;

/**
 * Every route the app registers, called as a client would: a route whose request reaches an upstream
 * must declare its route facts (config.modelCall), so that admission charges it to the model policy.
 * A route that calls an upstream without them fails in the model call (a 500); one that declared
 * them wrongly shows the management limit in its headers.
 */
describe('route facts', () => {
  let upstream: LoopbackUpstream;
  let test: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start();
    const config = defaultConfig({
      models: [{ id: 'm', upstream: upstream.baseUrl(), endpoints: ['chat', 'completions', 'embeddings', 'responses', 'images', 'audio', 'fine_tuning', 'messages'] }],
      defaults: { rate_limits: { requests_per_minute: MODEL_RPM, burst_limit: 0 } },
      rate_limits: { management_requests_per_minute: MANAGEMENT_RPM },
    });
    test = await buildTestApp('memory', { config });
    project = await createProject(test.app);
  });
  afterAll(async () => {
    await test.close();
    await upstream.close();
  });

  /** Every route of the app, from its own OpenAPI document (which lists each registered route). */
  function registeredRoutes(): { method: string; url: string; multipart: boolean }[] {
    const document = test.app.swagger() as { paths: Record<string, Record<string, { requestBody?: { content?: Record<string, unknown> } }>> };
    const routes = [];
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const url = path.replace(/\{[^}]+\}/g, 'x1234567890abcdef');
        routes.push({ method: method.toUpperCase(), url, multipart: Object.keys(operation.requestBody?.content ?? {}).some((type) => type.startsWith('multipart/')) });
      }
    }
    return routes;
  }

  function multipartBody(): { payload: Buffer; contentType: string } {
    const boundary = 'routefacts0123456789';
    const parts = [
      `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n`,
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`,
    ];
    const payload = Buffer.concat([Buffer.from(parts.join('')), silentWav(1), Buffer.from(`\r\n--${boundary}--\r\n`)]);
    return { payload, contentType: `multipart/form-data; boundary=${boundary}` };
  }

  it('every route that reaches an upstream declares itself a model route, and no route fails for lack of facts', async () => {
    const routes = registeredRoutes().filter((route) => route.url.startsWith('/v1/'));
    expect(routes.length).toBeGreaterThan(25);
    const reached: string[] = [];
    const modelPolicy: string[] = [];
    const send = (route: { method: string; url: string }, body: { payload: string | Buffer; contentType: string } | null) =>
      test.app.inject({
        method: route.method,
        url: route.url,
        headers: { ...project.auth, ...(body ? { 'content-type': body.contentType } : {}) },
        ...(body ? { payload: body.payload } : {}),
      });
    const json = {
      payload: JSON.stringify({ model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }], prompt: 'hi', input: 'hi', voice: 'alloy', training_file: 'file-abc' }),
      contentType: 'application/json',
    };
    for (const route of routes) {
      const before = upstream.requests.length;
      const hasBody = route.method !== 'GET' && route.method !== 'DELETE';
      let response = await send(route, hasBody ? (route.multipart ? multipartBody() : json) : null);
      // A route that reads a form (its schema says nothing of its body) is called again with one.
      if (hasBody && response.statusCode === 400 && upstream.requests.length === before) {
        const asForm = await send(route, multipartBody());
        const refusedType = asForm.statusCode === 400 && (JSON.parse(asForm.body) as { error?: { param?: string } }).error?.param === 'content-type';
        if (!refusedType) response = asForm;
      }
      const name = `${route.method} ${route.url}`;
      expect(response.statusCode, `${name}: ${response.body}`).toBeLessThan(500);
      if (upstream.requests.length > before) reached.push(name);
      if (response.headers['x-ratelimit-limit-requests'] === String(MODEL_RPM)) modelPolicy.push(name);
      else expect(response.headers['x-ratelimit-limit-requests'], name).toBe(String(MANAGEMENT_RPM));
    }
    // The creation routes all reached the upstream with these requests, so the check above is not vacuous.
    expect(reached.sort()).toEqual(
      [
        'POST /v1/audio/speech',
        'POST /v1/audio/transcriptions',
        'POST /v1/chat/completions',
        'POST /v1/completions',
        'POST /v1/embeddings',
        'POST /v1/fine_tuning/jobs',
        'POST /v1/images/generations',
        'POST /v1/messages',
        'POST /v1/responses',
      ].sort(),
    );
    // count_tokens is model traffic (it counts as a request), answered by the gateway's estimate for an OpenAI-compatible model.
    expect(modelPolicy.sort()).toEqual([...reached, 'POST /v1/messages/count_tokens'].sort());
  });

  it('a route that calls an upstream without declaring its facts is refused by the model call itself', async () => {
    const { callResource } = await import('../../src/model-call/resource-call.js');
    const bare = await buildTestApp('memory', {
      config: defaultConfig({ models: [{ id: 'm', upstream: upstream.baseUrl(), endpoints: ['images'] }] }),
    });
    try {
      // Registered on a fresh instance the way a route file would, minus the facts.
      const { default: Fastify } = await import('fastify');
      const app = Fastify();
      const before = upstream.requests.length;
      app.post('/v1/undeclared', async (request, reply) => {
        await callResource(bare.ctx, request, reply, bare.ctx.models.serving('m', 'images'), () => ({ path: '/images/generations', body: '{}', accept: 'application/json' }));
        return {};
      });
      const response = await app.inject({ method: 'POST', url: '/v1/undeclared', payload: {} });
      expect(response.statusCode).toBe(500);
      expect(upstream.requests.length).toBe(before);
      await app.close();
    } finally {
      await bare.close();
    }
  });
});
