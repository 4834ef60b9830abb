import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { SCOPES } from '../../src/auth/key-access.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { buildTestApp, createProject, errorOf, type TestApp, type TestProject } from '../support/test-app.js';

/** The scope each /v1 route needs (docs/api.md, "Scopes"); null: open to every key of the project. */
const EXPECTED: Record<string, string | null> = {
  'GET /v1/api-keys': 'keys:read',
  'GET /v1/api-keys/{api_key_id}': 'keys:read',
  'POST /v1/api-keys': 'keys:write',
  'PUT /v1/api-keys/{api_key_id}': 'keys:write',
  'PATCH /v1/api-keys/{api_key_id}': 'keys:write',
  'DELETE /v1/api-keys/{api_key_id}': 'keys:write',
  'PUT /v1/projects/{project_id}': 'project:write',
  'PATCH /v1/projects/{project_id}/rate-limits': 'project:write',
  'GET /v1/projects/{project_id}/usage': 'usage:read',
  'GET /v1/projects/{project_id}': null,
  'GET /v1/conversations/{conversation_id}': 'conversations:read',
  'DELETE /v1/conversations/{conversation_id}': 'model',
  'GET /v1/models': null,
  'GET /v1/models/{*}': null,
};

/**
 * Every route the app registers under /v1, called by a key that has every scope but the one the
 * route should need: each is refused naming that scope, so no route is open by omission (the v1
 * scope refuses to register a route without config.scope: src/routes/v1.ts). Model routes need `model`.
 */
describe('route scopes', () => {
  let upstream: LoopbackUpstream;
  let test: TestApp;
  let project: TestProject;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start();
    const config = defaultConfig({
      models: [{ id: 'm', upstream: upstream.baseUrl(), endpoints: ['chat', 'completions', 'embeddings', 'responses', 'images', 'audio', 'fine_tuning', 'messages'] }],
    });
    test = await buildTestApp('memory', { config });
    project = await createProject(test.app);
  });
  afterAll(async () => {
    await test.close();
    await upstream.close();
  });

  it('every /v1 route declares its scope and refuses a key without it, before any upstream call', async () => {
    const document = test.app.swagger() as { paths: Record<string, Record<string, unknown>> };
    const routes = Object.entries(document.paths)
      .filter(([path]) => path.startsWith('/v1/'))
      .flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`));
    expect(routes.length).toBeGreaterThan(25);
    const keys = new Map<string, Record<string, string>>();
    for (const scope of SCOPES) {
      const created = await test.app.inject({
        method: 'POST',
        url: '/v1/api-keys',
        headers: project.auth,
        payload: { name: `no ${scope}`, project_id: project.projectId, scopes: SCOPES.filter((other) => other !== scope) },
      });
      keys.set(scope, { authorization: `Bearer ${created.json().secret}` });
    }
    const none = await test.app.inject({ method: 'POST', url: '/v1/api-keys', headers: project.auth, payload: { name: 'none', project_id: project.projectId, scopes: [] } });
    const before = upstream.requests.length;
    for (const route of routes) {
      const [method, path] = route.split(' ') as [string, string];
      const url = path.replace('{project_id}', project.projectId).replace(/\{[^}]+\}/g, 'x1234567890abcdef');
      const expected = route in EXPECTED ? EXPECTED[route]! : 'model';
      const auth = expected === null ? { authorization: `Bearer ${none.json().secret}` } : keys.get(expected)!;
      const hasBody = method !== 'GET' && method !== 'DELETE';
      const response = await test.app.inject({ method: method as 'GET', url, headers: auth, ...(hasBody ? { payload: { model: 'm' } } : {}) });
      if (expected === null) {
        expect(response.statusCode, `${route}: ${response.body}`).not.toBe(403);
        continue;
      }
      expect(response.statusCode, `${route}: ${response.body}`).toBe(403);
      const error = route.includes('/v1/messages') ? (response.json() as { error: { message: string } }).error : errorOf(response);
      expect(error.message, route).toContain(`'${expected}'`);
    }
    expect(upstream.requests.length).toBe(before);
  });
});
