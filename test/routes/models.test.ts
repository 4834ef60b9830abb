import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, createProject, errorOf, type TestApp, type TestProject } from '../support/test-app.js';
import { defaultConfig } from '../../src/config/gateway-config.js';

describe('GET /v1/models/{model_id}', () => {
  let test: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    test = await buildTestApp('memory', {
      config: defaultConfig({
        models: [
          { id: 'echo-1', provider: 'echo', context_window: 8192, max_output_tokens: 1024 },
          { id: 'meta-llama/Llama-3.1-8B', upstream: 'http://127.0.0.1:9/v1', endpoints: ['chat', 'fine_tuning'], owned_by: 'meta' },
        ],
      }),
    });
    project = await createProject(test.app);
  });
  afterAll(() => test.close());

  const get = (url: string) => test.app.inject({ url, headers: project.auth });

  it('answers capabilities, and limits with include_limits=true', async () => {
    const plain = await get('/v1/models/echo-1');
    expect(plain.json()).toEqual({
      id: 'echo-1',
      object: 'nova.resource',
      status: 'succeeded',
      owned_by: 'nova-gateway',
      endpoints: ['chat'],
      capabilities: { chat: true, streaming: true, images: false, audio: false, fine_tuning: false },
    });
    const limited = await get('/v1/models/echo-1?include_limits=true');
    expect(limited.json().limits).toEqual({ context_window: 8192, max_output_tokens: 1024 });
  });

  it('serves model ids with a slash, encoded or not', async () => {
    for (const url of ['/v1/models/meta-llama/Llama-3.1-8B', '/v1/models/meta-llama%2FLlama-3.1-8B']) {
      const res = await get(`${url}?include_limits=true`);
      expect(res.json()).toMatchObject({
        id: 'meta-llama/Llama-3.1-8B',
        owned_by: 'meta',
        capabilities: { chat: true, fine_tuning: true },
        limits: { context_window: null, max_output_tokens: null },
      });
    }
  });

  it('404 model_not_found for an unknown model; 403 for another project_id; 400 for a bad boolean', async () => {
    expect(errorOf(await get('/v1/models/gpt-9'))).toMatchObject({ status: 404, type: 'not_found_error', code: 'model_not_found' });
    expect(errorOf(await get(`/v1/models/echo-1?project_id=proj_someoneelse000000000`))).toMatchObject({ status: 403, code: 'project_mismatch' });
    expect((await get(`/v1/models/echo-1?project_id=${project.projectId}`)).statusCode).toBe(200);
    expect(errorOf(await get('/v1/models/echo-1?include_limits=perhaps'))).toMatchObject({ status: 400, param: 'include_limits' });
  });

  it("lists the models in OpenAI's own shape, with the routes each serves", async () => {
    const res = await get('/v1/models');
    const body = res.json();
    expect(body).toEqual({
      object: 'list',
      data: [
        { id: 'echo-1', object: 'model', created: expect.any(Number), owned_by: 'nova-gateway', endpoints: ['chat'] },
        { id: 'meta-llama/Llama-3.1-8B', object: 'model', created: expect.any(Number), owned_by: 'meta', endpoints: ['chat', 'fine_tuning'] },
      ],
    });
    expect(body.data[0].created).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
  });
});
