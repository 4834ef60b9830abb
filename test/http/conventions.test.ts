import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { buildTestApp, createProject, errorOf, type TestApp, type TestProject } from '../support/test-app.js';

describe('HTTP conventions', () => {
  let t: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    t = await buildTestApp('memory', { config: defaultConfig({ server: { body_limit_bytes: 2048 } }) });
    project = await createProject(t.app);
  });
  afterAll(() => t.close());

  it('keeps a valid incoming x-request-id and mints one otherwise', async () => {
    const kept = await t.app.inject({ url: '/livez', headers: { 'x-request-id': 'trace-abc.123' } });
    expect(kept.headers['x-request-id']).toBe('trace-abc.123');
    const minted = await t.app.inject({ url: '/livez', headers: { 'x-request-id': 'bad id with spaces' } });
    expect(minted.headers['x-request-id']).toMatch(/^req_[0-9A-Za-z]{16,}$/);
    const error = await t.app.inject({ url: `/v1/api-keys?project_id=${project.projectId}` });
    expect(error.headers['x-request-id']).toMatch(/^req_/);
  });

  it('answers an unknown route with the error envelope', async () => {
    const response = await t.app.inject({ url: '/v1/no-such-thing' });
    expect(errorOf(response)).toMatchObject({ status: 404, type: 'not_found_error', code: 'resource_not_found' });
  });

  it('reads a JSON body whatever the case and parameters of its media type, and refuses other media types naming content-type', async () => {
    for (const type of ['application/json; charset=utf-8', 'application/json;charset=UTF-8', 'Application/JSON', 'application/merge-patch+json; charset=utf-8']) {
      const response = await t.app.inject({
        method: 'POST',
        url: '/v1/api-keys',
        headers: { ...project.auth, 'content-type': type },
        payload: JSON.stringify({ name: 'typed', project_id: project.projectId }),
      });
      expect(response.statusCode, type).toBe(200);
    }
    for (const type of ['text/plain', 'application/jsonx', 'application/x-www-form-urlencoded']) {
      const response = await t.app.inject({
        method: 'POST',
        url: '/v1/api-keys',
        headers: { ...project.auth, 'content-type': type },
        payload: JSON.stringify({ name: 'typed', project_id: project.projectId }),
      });
      expect(errorOf(response), type).toMatchObject({ status: 400, param: 'content-type' });
    }
  });

  it('answers a body over the limit with 413', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/api-keys',
      headers: { ...project.auth, 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'x'.repeat(4096), project_id: project.projectId }),
    });
    expect(errorOf(response)).toMatchObject({ status: 413, type: 'invalid_request_error', code: 'payload_too_large' });
  });

  it('serves the probes', async () => {
    expect((await t.app.inject({ url: '/livez' })).json()).toEqual({ status: 'ok' });
    expect((await t.app.inject({ url: '/readyz' })).json()).toEqual({ status: 'ready' });
  });

  it('fails readiness and new requests with 503 shutting_down while draining', async () => {
    t.ctx.lifecycle.draining = true;
    try {
      expect((await t.app.inject({ url: '/readyz' })).statusCode).toBe(503);
      expect((await t.app.inject({ url: '/livez' })).statusCode).toBe(200);
      const refused = await t.app.inject({ url: `/v1/api-keys?project_id=${project.projectId}`, headers: project.auth });
      expect(errorOf(refused)).toMatchObject({ status: 503, type: 'service_unavailable', code: 'shutting_down' });
    } finally {
      t.ctx.lifecycle.draining = false;
    }
  });

  it('publishes an OpenAPI document generated from the route schemas', async () => {
    const document = (await t.app.inject({ url: '/openapi.json' })).json();
    expect(document.openapi).toBe('3.1.0');
    expect(Object.keys(document.paths)).toEqual(expect.arrayContaining(['/v1/api-keys', '/v1/api-keys/{api_key_id}', '/admin/v1/projects']));
    expect(Object.keys(document.paths['/v1/api-keys/{api_key_id}'])).toEqual(expect.arrayContaining(['put', 'delete']));
    const listParameters = document.paths['/v1/api-keys'].get.parameters.map((parameter: { name: string }) => parameter.name);
    expect(listParameters).toEqual(expect.arrayContaining(['project_id', 'limit', 'cursor']));
  });

  it('hides internal errors behind a plain 500', async () => {
    const store = t.store as unknown as { apiKeys: { list: unknown } };
    const original = store.apiKeys.list;
    store.apiKeys.list = async () => {
      throw new Error('secret internal detail at /src/store.ts:12');
    };
    try {
      const response = await t.app.inject({ url: `/v1/api-keys?project_id=${project.projectId}`, headers: project.auth });
      expect(errorOf(response)).toMatchObject({ status: 500, type: 'api_error', code: 'internal_error' });
      expect(response.body).not.toContain('secret internal detail');
    } finally {
      store.apiKeys.list = original;
    }
  });
});
