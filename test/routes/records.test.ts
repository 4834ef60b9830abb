import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { RecordingUsageMeter } from '../support/recording-usage.js';
import { ADMIN_TOKEN, buildTestApp, createProject, createTestStore, errorOf, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

describe.each(STORE_KINDS)('fine-tuning jobs, transcriptions and assets (%s store)', (kind) => {
  let t: TestApp;
  let project: TestProject;
  let usage: RecordingUsageMeter;

  beforeEach(async () => {
    usage = new RecordingUsageMeter();
    t = await buildTestApp(kind, { deps: { usage } });
    project = await createProject(t.app);
  });
  afterEach(() => t.close());

  const register = async (path: string, payload: Record<string, unknown>, projectId = project.projectId) => {
    const response = await t.app.inject({ method: 'POST', url: `/admin/v1/projects/${projectId}/${path}`, headers: admin, payload });
    expect(response.statusCode).toBe(200);
    return response.json();
  };
  const call = (method: 'PATCH' | 'PUT', url: string, payload: unknown, auth = project.auth) =>
    t.app.inject({ method, url, headers: auth, payload: payload as Record<string, unknown> });

  describe('PATCH /v1/fine_tuning/jobs/{job_id}', () => {
    it('updates name and merges metadata; the upstream status stays job_status', async () => {
      await register('fine_tuning/jobs', { id: 'ftjob-abc123', name: 'v1', job_status: 'running', model: 'llama', metadata: { team: 'search', stale: 'x' } });
      const response = await call('PATCH', '/v1/fine_tuning/jobs/ftjob-abc123', { name: 'v2', metadata: { owner: 'ana', stale: null } });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toMatchObject({
        id: 'ftjob-abc123',
        object: 'nova.resource',
        status: 'succeeded',
        name: 'v2',
        job_status: 'running',
        model: 'llama',
        metadata: { team: 'search', owner: 'ana' },
      });
      expect(response.json().metadata).not.toHaveProperty('stale');
      const metadataOnly = await call('PATCH', '/v1/fine_tuning/jobs/ftjob-abc123', { metadata: { owner: 'bo' } });
      expect(metadataOnly.json()).toMatchObject({ name: 'v2', metadata: { team: 'search', owner: 'bo' } });
    });

    it.each([
      ['an empty body', {}, 'body'],
      ['an empty name', { name: '' }, 'name'],
      ['an unknown field', { training_file: 'file-1' }, 'training_file'],
      ['metadata that is not an object', { metadata: ['a'] }, 'metadata'],
      ['a metadata value that is not a string', { metadata: { n: 5 } }, 'metadata.n'],
      ['a metadata value over 512 characters', { metadata: { long: 'x'.repeat(513) } }, 'metadata.long'],
      // A refused key is named, like a refused field.
      ['a metadata key over 64 characters', { metadata: { ['k'.repeat(65)]: 'v' } }, `metadata.${'k'.repeat(65)}`],
      ['more than 16 metadata keys in one patch', { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata'],
    ])('refuses %s', async (_name, payload, param) => {
      await register('fine_tuning/jobs', { id: 'ftjob-v' });
      expect(errorOf(await call('PATCH', '/v1/fine_tuning/jobs/ftjob-v', payload))).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_parameter', param });
    });

    it('refuses a merge that would exceed 16 keys and stores nothing of it', async () => {
      await register('fine_tuning/jobs', { id: 'ftjob-full', metadata: Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, 'v'])) });
      const refused = await call('PATCH', '/v1/fine_tuning/jobs/ftjob-full', { name: 'renamed', metadata: { a: '1', b: '2' } });
      expect(errorOf(refused)).toMatchObject({ status: 400, code: 'invalid_parameter', param: 'metadata' });
      // Replacing one key and removing another keeps the count at 15: accepted.
      const accepted = await call('PATCH', '/v1/fine_tuning/jobs/ftjob-full', { metadata: { a: '1', k0: null } });
      expect(accepted.statusCode).toBe(200);
      expect(Object.keys(accepted.json().metadata)).toHaveLength(15);
      expect(accepted.json().name).toBeNull();
    });
  });

  describe('PUT /v1/audio/transcriptions/{transcription_id}', () => {
    it('replaces text and canonical language; an omitted language is cleared', async () => {
      const created = await register('audio/transcriptions', { text: 'helo wrld', language: 'en', duration_seconds: 3.5 });
      expect(created.id).toMatch(/^trans_/);
      const replaced = await call('PUT', `/v1/audio/transcriptions/${created.id}`, { text: 'hello world', language: 'en-us' });
      expect(replaced.json()).toMatchObject({ id: created.id, text: 'hello world', language: 'en-US', duration_seconds: 3.5 });
      expect(replaced.json()).not.toHaveProperty('metadata');
      const cleared = await call('PUT', `/v1/audio/transcriptions/${created.id}`, { text: 'hello world' });
      expect(cleared.json().language).toBeNull();
      const scripted = await call('PUT', `/v1/audio/transcriptions/${created.id}`, { text: 'x', language: 'ZH-hant-tw' });
      expect(scripted.json().language).toBe('zh-Hant-TW');
    });

    it.each([
      ['a missing text', { language: 'en' }, 'text'],
      ['a text that is not a string', { text: 42 }, 'text'],
      ['an invalid language tag', { text: 'x', language: 'english!' }, 'language'],
      ['a language tag that is too long', { text: 'x', language: 'x'.repeat(65) }, 'language'],
      ['an unknown field', { text: 'x', speaker: 'a' }, 'speaker'],
    ])('refuses %s', async (_name, payload, param) => {
      const created = await register('audio/transcriptions', { text: 'x' });
      expect(errorOf(await call('PUT', `/v1/audio/transcriptions/${created.id}`, payload))).toMatchObject({ status: 400, code: 'invalid_parameter', param });
    });
  });

  describe('PATCH /v1/assets/{asset_id}', () => {
    it('merges metadata and replaces tags', async () => {
      const created = await register('assets', { asset_kind: 'image', metadata: { campaign: 'spring' }, tags: ['a', 'b'] });
      expect(created.id).toMatch(/^asset_/);
      const response = await call('PATCH', `/v1/assets/${created.id}`, { metadata: { reviewed: 'yes' }, tags: ['final'] });
      expect(response.json()).toMatchObject({ asset_kind: 'image', metadata: { campaign: 'spring', reviewed: 'yes' }, tags: ['final'] });
      const keepTags = await call('PATCH', `/v1/assets/${created.id}`, { metadata: { campaign: null } });
      expect(keepTags.json()).toMatchObject({ metadata: { reviewed: 'yes' }, tags: ['final'] });
    });

    it.each([
      ['a missing metadata', { tags: ['a'] }, 'metadata'],
      ['more than 32 tags', { metadata: {}, tags: Array.from({ length: 33 }, (_, i) => `t${i}`) }, 'tags'],
      ['an empty tag', { metadata: {}, tags: [''] }, 'tags[0]'],
      ['a tag over 64 characters', { metadata: {}, tags: ['ok', 't'.repeat(65)] }, 'tags[1]'],
      ['tags that are not an array', { metadata: {}, tags: 'a,b' }, 'tags'],
    ])('refuses %s', async (_name, payload, param) => {
      const created = await register('assets', { asset_kind: 'audio' });
      expect(errorOf(await call('PATCH', `/v1/assets/${created.id}`, payload))).toMatchObject({ status: 400, code: 'invalid_parameter', param });
    });
  });

  it('answers 404 for another project\'s record on every endpoint, and leaves it unchanged', async () => {
    const stranger = await createProject(t.app, { name: 'stranger' });
    await register('fine_tuning/jobs', { id: 'ftjob-theirs', name: 'theirs' }, stranger.projectId);
    const transcription = await register('audio/transcriptions', { text: 'theirs' }, stranger.projectId);
    const asset = await register('assets', { asset_kind: 'image' }, stranger.projectId);
    const attempts = [
      [await call('PATCH', '/v1/fine_tuning/jobs/ftjob-theirs', { name: 'mine' }), 'job_id'],
      [await call('PUT', `/v1/audio/transcriptions/${transcription.id}`, { text: 'mine' }), 'transcription_id'],
      [await call('PATCH', `/v1/assets/${asset.id}`, { metadata: { mine: 'yes' } }), 'asset_id'],
    ] as const;
    for (const [response, param] of attempts) {
      expect(errorOf(response)).toMatchObject({ status: 404, type: 'not_found_error', code: 'resource_not_found', param });
    }
    const untouched = await call('PATCH', '/v1/fine_tuning/jobs/ftjob-theirs', { metadata: {} }, stranger.auth);
    expect(untouched.json().name).toBe('theirs');
    const unknown = await call('PATCH', '/v1/fine_tuning/jobs/ftjob-nobody', { name: 'x' });
    expect(errorOf(unknown)).toMatchObject({ status: 404, code: 'resource_not_found', param: 'job_id' });
  });

  it('counts stored bytes: registration adds, updates add their difference', async () => {
    const created = await register('audio/transcriptions', { text: 'short' });
    const afterRegister = usage.total('storageBytesDelta', project.projectId);
    expect(afterRegister).toBeGreaterThan('short'.length);
    await call('PUT', `/v1/audio/transcriptions/${created.id}`, { text: 'a much longer corrected transcript' });
    const grown = usage.total('storageBytesDelta', project.projectId) - afterRegister;
    expect(grown).toBe('a much longer corrected transcript'.length - 'short'.length);
  });

  it('refuses registration for an unknown project and invalid upstream ids', async () => {
    const missing = await t.app.inject({ method: 'POST', url: '/admin/v1/projects/proj_missing00000000000/fine_tuning/jobs', headers: admin, payload: { id: 'ftjob-1' } });
    expect(errorOf(missing)).toMatchObject({ status: 404, code: 'resource_not_found', param: 'project_id' });
    const badId = await t.app.inject({ method: 'POST', url: `/admin/v1/projects/${project.projectId}/fine_tuning/jobs`, headers: admin, payload: { id: 'bad id/../x' } });
    expect(errorOf(badId)).toMatchObject({ status: 400, code: 'invalid_parameter', param: 'id' });
  });
});

describe('concurrent metadata updates on two replicas', () => {
  it('keeps all 16 keys added by 16 parallel PATCHes', async () => {
    const prefix = `conc${randomBase62(8)}`;
    const [a, b] = await Promise.all([
      buildTestApp('redis', { store: await createTestStore('redis', { prefix }) }),
      buildTestApp('redis', { store: await createTestStore('redis', { prefix }) }),
    ]);
    try {
      const project = await createProject(a.app);
      await a.app.inject({ method: 'POST', url: `/admin/v1/projects/${project.projectId}/fine_tuning/jobs`, headers: admin, payload: { id: 'ftjob-race' } });
      const responses = await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          (i % 2 ? a : b).app.inject({
            method: 'PATCH',
            url: '/v1/fine_tuning/jobs/ftjob-race',
            headers: project.auth,
            payload: { metadata: { [`key${i}`]: `value${i}` } },
          }),
        ),
      );
      expect(responses.map((response) => response.statusCode)).toEqual(Array(16).fill(200));
      const final = await b.app.inject({ method: 'PATCH', url: '/v1/fine_tuning/jobs/ftjob-race', headers: project.auth, payload: { metadata: {} } });
      expect(final.json().metadata).toEqual(Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`key${i}`, `value${i}`])));
    } finally {
      await Promise.all([a.close(), b.close()]);
      await Promise.all([a.store.close(), b.store.close()]);
    }
  });
});
