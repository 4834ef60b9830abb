import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { RecordingUsageMeter } from '../support/recording-usage.js';
import { buildTestApp, createProject, errorOf, type TestApp, type TestProject } from '../support/test-app.js';
import { silentWav } from '../support/wav.js';

/** Builds a multipart body by hand, as inject takes a payload buffer. */
function multipart(fields: Record<string, string>, files: Array<{ name: string; filename: string; type: string; bytes: Buffer }>) {
  const boundary = '----nova-test-boundary';
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  }
  for (const file of files) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${file.name}"; filename="${file.filename}"\r\nContent-Type: ${file.type}\r\n\r\n`));
    parts.push(file.bytes, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(parts), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

describe('creation pass-through: routing, validation, errors and usage', () => {
  let upstream: LoopbackUpstream;
  let t: TestApp;
  let project: TestProject;
  let usage: RecordingUsageMeter;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start();
  });
  afterAll(() => upstream.close());

  beforeEach(async () => {
    upstream.set('default', {});
    upstream.requests.length = 0;
    usage = new RecordingUsageMeter();
    const config = defaultConfig({
      models: [
        { id: 'echo-1', provider: 'echo' },
        { id: 'painter', upstream: upstream.baseUrl(), endpoints: ['images'] },
        { id: 'voice', upstream: upstream.baseUrl(), endpoints: ['audio'] },
        { id: 'tuner', upstream: upstream.baseUrl(), endpoints: ['fine_tuning'] },
        { id: 'nowhere', upstream: 'http://127.0.0.1:9/v1', endpoints: ['images'], timeout_ms: 2000 },
      ],
      server: { audio_upload_limit_bytes: 8192 },
    });
    t = await buildTestApp('memory', { config, deps: { usage } });
    project = await createProject(t.app);
  });
  afterEach(() => t.close());

  const post = (url: string, payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url, headers: project.auth, payload });
  const transcribe = (fields: Record<string, string>, files = [{ name: 'file', filename: 'a.wav', type: 'audio/wav', bytes: silentWav(0.5) }]) => {
    const body = multipart(fields, files);
    return t.app.inject({ method: 'POST', url: '/v1/audio/transcriptions', headers: { ...project.auth, ...body.headers }, payload: body.payload });
  };

  it('routes only to models that list the endpoint', async () => {
    expect(errorOf(await post('/v1/images/generations', { model: 'echo-1', prompt: 'x' }))).toMatchObject({ status: 404, type: 'not_found_error', code: 'model_not_found', param: 'model' });
    expect(errorOf(await post('/v1/images/generations', { model: 'voice', prompt: 'x' }))).toMatchObject({ status: 404, code: 'model_not_found' });
    expect(errorOf(await post('/v1/fine_tuning/jobs', { model: 'painter', training_file: 'f' }))).toMatchObject({ status: 404, code: 'model_not_found' });
    expect(errorOf(await transcribe({ model: 'painter' }))).toMatchObject({ status: 404, code: 'model_not_found' });
    expect(upstream.requests).toHaveLength(0);
  });

  it.each([
    ['/v1/images/generations', { model: 'painter' }, 'prompt'],
    ['/v1/images/generations', { model: 'painter', prompt: 'x', n: 11 }, 'n'],
    ['/v1/audio/speech', { model: 'voice', input: 'hi' }, 'voice'],
    ['/v1/audio/speech', { model: 'voice', input: '', voice: 'a' }, 'input'],
    ['/v1/fine_tuning/jobs', { model: 'tuner' }, 'training_file'],
    ['/v1/fine_tuning/jobs', { model: 'tuner', training_file: 'f', metadata: { k: 1 } }, 'metadata.k'],
  ])('%s refuses %o naming %s', async (url, payload, param) => {
    expect(errorOf(await post(url, payload))).toMatchObject({ status: 400, code: 'invalid_parameter', param });
  });

  it('counts images and registers one asset per image', async () => {
    const response = await post('/v1/images/generations', { model: 'painter', prompt: 'x', n: 3 });
    const ids = response.json().data.map((item: { asset_id: string }) => item.asset_id);
    expect(new Set(ids).size).toBe(3);
    expect(response.json().id).toBe(ids[0]);
    const report = usage.of(response.headers['x-request-id'] as string);
    expect(report).toHaveLength(1);
    expect(report[0]).toMatchObject({ imageGenerations: 3, model: 'painter' });
    expect(report[0]!.storageBytesDelta).toBeGreaterThan(0);
    for (const id of ids) expect((await t.app.inject({ method: 'PATCH', url: `/v1/assets/${id}`, headers: project.auth, payload: { metadata: {} } })).statusCode).toBe(200);
  });

  it('reads speech seconds from the generated audio', async () => {
    upstream.update('default', { speechSeconds: 1.5 });
    const response = await post('/v1/audio/speech', { model: 'voice', input: 'hello', voice: 'alloy' });
    expect(response.statusCode).toBe(200);
    expect(response.rawPayload.length).toBe(silentWav(1.5).length);
    expect(usage.of(response.headers['x-request-id'] as string)[0]).toMatchObject({ audioSeconds: 1.5 });
  });

  it('takes transcribed seconds from the backend when it reports them', async () => {
    const response = await transcribe({ model: 'voice' });
    expect(response.json()).toMatchObject({ duration_seconds: 4.25, language: null });
    expect(usage.of(response.headers['x-request-id'] as string)[0]).toMatchObject({ audioSeconds: 4.25 });
  });

  it.each([
    ['a missing file', { model: 'voice' }, [], 400, 'file'],
    ['a missing model', {}, undefined, 400, 'model'],
    ['an invalid language', { model: 'voice', language: 'not a tag' }, undefined, 400, 'language'],
    ['a file in another field', { model: 'voice' }, [{ name: 'audio', filename: 'a.wav', type: 'audio/wav', bytes: silentWav(0.1) }], 400, 'audio'],
  ])('transcription refuses %s', async (_name, fields, files, status, param) => {
    const response = await transcribe(fields as Record<string, string>, files as never);
    expect(errorOf(response)).toMatchObject({ status, code: 'invalid_parameter', param });
  });

  it('refuses an upload over the configured limit with 413', async () => {
    const response = await transcribe({ model: 'voice' }, [{ name: 'file', filename: 'big.wav', type: 'audio/wav', bytes: silentWav(2) }]);
    expect(errorOf(response)).toMatchObject({ status: 413, type: 'invalid_request_error', code: 'payload_too_large' });
    expect(upstream.requests).toHaveLength(0);
  });

  it('refuses a JSON body for a transcription, naming the content type', async () => {
    expect(errorOf(await post('/v1/audio/transcriptions', { model: 'voice' }))).toMatchObject({ status: 400, code: 'invalid_parameter', param: 'content-type' });
  });

  it('maps backend failures: 5xx is 502, unreachable is 503, a job without an id is 502', async () => {
    upstream.update('default', { status: 500 });
    expect(errorOf(await post('/v1/images/generations', { model: 'painter', prompt: 'x' }))).toMatchObject({ status: 502, type: 'upstream_error', code: 'upstream_error' });
    upstream.update('default', { status: 200 });
    expect(errorOf(await post('/v1/images/generations', { model: 'nowhere', prompt: 'x' }))).toMatchObject({ status: 503, code: 'upstream_unavailable' });
    upstream.update('default', { jobId: 'bad id with spaces' });
    expect(errorOf(await post('/v1/fine_tuning/jobs', { model: 'tuner', training_file: 'f' }))).toMatchObject({ status: 502, code: 'upstream_error' });
    expect(usage.records.filter((record) => record.storageBytesDelta)).toHaveLength(0);
  });
});
