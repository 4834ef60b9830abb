import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { GatewayProcess } from '../support/gateway-process.js';
import type { TestProject } from '../support/test-app.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const FAILED_ATTEMPTS_MAX = 3;

/** The fields of an answer these tests read: an error, or the record or policy written. */
interface Answer {
  error: { type: string; code: string; param?: string; message: string };
  metadata?: Record<string, string>;
  duration_seconds?: number;
  requests_per_minute?: number;
}

const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

/**
 * The real process on Redis: bodies nested too deep, reserved metadata keys and non-finite
 * numbers are refused before anything reaches an upstream or the store, and wrong admin
 * tokens are throttled per address like wrong API keys.
 */
describe('input limits against the real process', () => {
  let upstream: LoopbackUpstream;
  let gateway: GatewayProcess;
  let project: TestProject;

  /** Sends raw JSON text: JSON.stringify cannot write 1e309 or a 10,000-deep body cheaply. */
  const send = async (method: string, path: string, text: string, authorization = project.auth.authorization) => {
    const response = await fetch(`${gateway.url}${path}`, {
      method,
      headers: text === '' ? { authorization } : { authorization, 'content-type': 'application/json' },
      body: text === '' ? undefined : text,
    });
    return { status: response.status, headers: response.headers, body: (await response.json()) as Answer };
  };
  const admin = (method: string, path: string, text: string) => send(method, path, text, `Bearer ${ADMIN_TOKEN}`);

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start();
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN },
      configYaml: `
models:
  - id: relay
    upstream: ${upstream.baseUrl('default')}
auth:
  failed_attempts: { max: ${FAILED_ATTEMPTS_MAX}, window_seconds: 60, block_seconds: 60 }
redis:
  key_prefix: e2e${randomBase62(8)}
`,
    });
    project = await gateway.createProject({ name: 'limits' });
  });

  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  describe('JSON nesting depth (server.json_max_depth, default 64)', () => {
    const chat = (extra: string, content = '"hi"') =>
      `{"model":"relay","messages":[{"role":"user","content":${content}}]${extra}}`;

    it('refuses 10,000 levels in a chat content part or in a pass-through field with 400 naming body, calling no upstream', async () => {
      const before = upstream.requests.length;
      const inContentPart = await send('POST', '/v1/chat/completions', chat('', `[{"type":"text","text":"x","deep":${nested(10_000)}}]`));
      const inPassThrough = await send('POST', '/v1/chat/completions', chat(`,"vendor_extension":${nested(10_000)}`));

      for (const response of [inContentPart, inPassThrough]) {
        expect(response.status).toBe(400);
        expect(response.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_parameter', param: 'body' });
        expect(response.body.error.message).toContain('64');
      }
      expect(upstream.requests.length).toBe(before);
    });

    it('refuses deep nesting on management routes too', async () => {
      const response = await admin('POST', '/admin/v1/projects', `{"name":"x","extra":${nested(65)}}`);
      expect(response.status).toBe(400);
      expect(response.body.error.param).toBe('body');
    });

    it('relays nesting within the limit and does not count brackets inside strings', async () => {
      const before = upstream.requests.length;
      // 2 levels of envelope + 60 = 62 <= 64.
      const response = await send('POST', '/v1/chat/completions', chat(`,"vendor_extension":${nested(60)},"note":"${'['.repeat(10_000)}"`));
      expect(response.status).toBe(200);
      expect(upstream.requests.length).toBe(before + 1);
      expect(upstream.requests.at(-1)!.body.vendor_extension).toEqual(JSON.parse(nested(60)));
    });
  });

  describe('reserved metadata keys', () => {
    for (const key of ['__proto__', 'constructor', 'prototype']) {
      it(`refuses "${key}" as a metadata key with 400 naming it, and stores nothing`, async () => {
        const assetId = `asset_${randomBase62(16)}`;
        const registered = await admin(
          'POST',
          `/admin/v1/projects/${project.projectId}/assets`,
          `{"id":"${assetId}","asset_kind":"image","metadata":{"ok":"1","${key}":"x"}}`,
        );
        expect(registered.status).toBe(400);
        expect(registered.body.error).toMatchObject({ code: 'invalid_parameter', param: `metadata.${key}` });
        // Not stored: the project cannot find it.
        expect((await send('PATCH', `/v1/assets/${assetId}`, '{"metadata":{}}')).status).toBe(404);

        // On an existing record, a patch with the key changes nothing.
        const created = await admin('POST', `/admin/v1/projects/${project.projectId}/assets`, `{"id":"${assetId}","asset_kind":"image","metadata":{"a":"1"}}`);
        expect(created.status).toBe(200);
        const patched = await send('PATCH', `/v1/assets/${assetId}`, `{"metadata":{"b":"2","${key}":"x"}}`);
        expect(patched.status).toBe(400);
        expect(patched.body.error.param).toBe(`metadata.${key}`);
        const unchanged = await send('PATCH', `/v1/assets/${assetId}`, '{"metadata":{}}');
        expect(unchanged.body.metadata).toEqual({ a: '1' });
      });
    }
  });

  describe('non-finite numbers', () => {
    it('refuses duration_seconds 1e309 with 400 before the transcription is stored', async () => {
      const id = `trans_${randomBase62(16)}`;
      const response = await admin('POST', `/admin/v1/projects/${project.projectId}/audio/transcriptions`, `{"id":"${id}","text":"hello","duration_seconds":1e309}`);
      expect(response.status).toBe(400);
      expect(response.body.error).toMatchObject({ code: 'invalid_parameter', param: 'duration_seconds' });
      expect(response.body.error.message).toContain('finite');
      expect((await send('PUT', `/v1/audio/transcriptions/${id}`, '{"text":"x"}')).status).toBe(404);

      const negative = await admin('POST', `/admin/v1/projects/${project.projectId}/audio/transcriptions`, `{"id":"${id}","text":"hello","duration_seconds":-1e309}`);
      expect(negative.status).toBe(400);
      // A finite duration is stored (the refusal is about the number, not the route).
      const finite = await admin('POST', `/admin/v1/projects/${project.projectId}/audio/transcriptions`, `{"id":"${id}","text":"hello","duration_seconds":1.5e3}`);
      expect(finite.status).toBe(200);
      expect(finite.body.duration_seconds).toBe(1500);
    });

    it('refuses non-finite rate limits and keeps the stored policy', async () => {
      const path = `/v1/projects/${project.projectId}/rate-limits`;
      const refused = await send('PATCH', path, '{"requests_per_minute":1e309}');
      expect(refused.status).toBe(400);
      expect(refused.body.error.param).toBe('requests_per_minute');
      const kept = await send('PATCH', path, '{"burst_limit":7}');
      expect(kept.status).toBe(200);
      expect(kept.body.requests_per_minute).toBe(600);
    });
  });

  describe('failed admin tokens', () => {
    it('are throttled per address like failed API keys; the right token still works', async () => {
      const wrong = `Bearer wrong-admin-token-${randomBase62(8)}`;
      for (let attempt = 0; attempt < FAILED_ATTEMPTS_MAX; attempt++) {
        const response = await send('GET', `/admin/v1/projects/${project.projectId}/audit`, '', wrong);
        expect(response.status).toBe(401);
      }
      const throttled = await send('GET', `/admin/v1/projects/${project.projectId}/audit`, '', wrong);
      expect(throttled.status).toBe(429);
      expect(throttled.body.error.code).toBe('rate_limit_exceeded');
      expect(Number(throttled.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

      // No token at all is not a guess and is not counted; the right token is never refused.
      expect((await fetch(`${gateway.url}/admin/v1/projects/${project.projectId}/audit`)).status).toBe(401);
      const right = await fetch(`${gateway.url}/admin/v1/projects/${project.projectId}/audit`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(right.status).toBe(200);
      // The allowance is shared with API keys: a wrong key from the same address is throttled too.
      const wrongKey = await fetch(`${gateway.url}/v1/models`, { headers: { authorization: 'Bearer nova_sk_not-a-key' } });
      expect(wrongKey.status).toBe(429);
    });
  });
});
