import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { silentWav } from '../support/wav.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;

/**
 * The real process on Redis with a backend implementing the four creation routes:
 * create through the gateway → update through the SPEC endpoint → usage shows it.
 */
describe('fine-tuning jobs, transcriptions, images and speech end to end', () => {
  let upstream: LoopbackUpstream;
  let gateway: GatewayProcess;
  let auth: { authorization: string };
  let projectId: string;

  const json = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${gateway.url}${path}`, {
      method,
      headers: { ...auth, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start();
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN, UPSTREAM_KEY: 'sk-upstream-secret-123' },
      configYaml: `
models:
  - id: tuner
    upstream: ${upstream.baseUrl()}
    upstream_model: base-model-7b
    api_key_env: UPSTREAM_KEY
    endpoints: [fine_tuning]
  - id: painter
    upstream: ${upstream.baseUrl()}
    endpoints: [images]
  - id: voice
    upstream: ${upstream.baseUrl()}
    endpoints: [audio]
redis:
  key_prefix: e2e${randomBase62(8)}
usage:
  flush_interval_ms: 50
`,
    });
    ({ projectId, auth } = await gateway.createProject({ name: 'media' }));
  });

  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  it('creates, updates and meters all four kinds of record', async () => {
    // Fine-tuning job: created upstream, registered here, renamed through the SPEC endpoint.
    const job = await json('POST', '/v1/fine_tuning/jobs', { model: 'tuner', training_file: 'file-abc', name: 'first try', metadata: { team: 'search' }, suffix: 'x' });
    expect(job.status).toBe(200);
    expect(job.body).toMatchObject({ id: 'ftjob-fake123', object: 'nova.resource', status: 'succeeded', job_status: 'queued', name: 'first try', model: 'tuner', training_file: 'file-abc' });
    const upstreamJob = upstream.requestsTo('/fine_tuning/jobs')[0]!;
    expect(upstreamJob.body).toEqual({ model: 'base-model-7b', training_file: 'file-abc', metadata: { team: 'search' }, suffix: 'x' });
    expect(upstreamJob.headers.authorization).toBe('Bearer sk-upstream-secret-123');
    const renamed = await json('PATCH', '/v1/fine_tuning/jobs/ftjob-fake123', { name: 'second try', metadata: { owner: 'ana' } });
    expect(renamed.body).toMatchObject({ name: 'second try', job_status: 'queued', metadata: { team: 'search', owner: 'ana' } });

    // Images: two generations, two assets.
    const images = await json('POST', '/v1/images/generations', { model: 'painter', prompt: 'a lighthouse', n: 2, size: '256x256' });
    expect(images.status).toBe(200);
    const items = images.body.data as Array<{ asset_id: string; url: string }>;
    expect(items).toHaveLength(2);
    expect(items.every((item) => /^asset_[0-9A-Za-z]{16,}$/.test(item.asset_id) && item.url.startsWith('https://'))).toBe(true);
    const tagged = await json('PATCH', `/v1/assets/${items[1]!.asset_id}`, { metadata: { campaign: 'spring' }, tags: ['hero'] });
    expect(tagged.body).toMatchObject({ id: items[1]!.asset_id, asset_kind: 'image', tags: ['hero'], metadata: { campaign: 'spring' } });

    // Speech: the body is the audio, the asset id comes in a header; 2 s of audio are counted.
    upstream.update('default', { speechSeconds: 2 });
    const speech = await fetch(`${gateway.url}/v1/audio/speech`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'voice', input: 'hello there', voice: 'alloy' }),
    });
    expect(speech.status).toBe(200);
    expect(speech.headers.get('content-type')).toBe('audio/wav');
    const speechAsset = speech.headers.get('x-asset-id')!;
    expect(speechAsset).toMatch(/^asset_/);
    expect(Buffer.from(await speech.arrayBuffer()).subarray(0, 4).toString('ascii')).toBe('RIFF');
    const speechTagged = await json('PATCH', `/v1/assets/${speechAsset}`, { metadata: { voice: 'alloy' } });
    expect(speechTagged.body).toMatchObject({ asset_kind: 'audio', metadata: { voice: 'alloy' } });

    // Transcription of a 3 s file; the backend reports no duration, so the file header is read.
    upstream.update('default', { reportDuration: false });
    const form = new FormData();
    form.append('model', 'voice');
    form.append('language', 'en-us');
    form.append('file', new Blob([new Uint8Array(silentWav(3))], { type: 'audio/wav' }), 'clip.wav');
    const transcribed = await fetch(`${gateway.url}/v1/audio/transcriptions`, { method: 'POST', headers: auth, body: form });
    const transcript = (await transcribed.json()) as Record<string, unknown>;
    expect(transcribed.status).toBe(200);
    expect(transcript).toMatchObject({ text: 'hello from the fake transcriber', language: 'en-US', duration_seconds: 3 });
    expect(transcript.id).toMatch(/^trans_/);
    const forwarded = upstream.requestsTo('/audio/transcriptions')[0]!;
    expect(forwarded.multipart).toMatchObject({ fields: { model: 'voice', language: 'en-us' }, fileName: 'clip.wav', fileBytes: silentWav(3).length });
    const corrected = await json('PUT', `/v1/audio/transcriptions/${transcript.id}`, { text: 'hello from the corrected transcript', language: 'en-GB' });
    expect(corrected.body).toMatchObject({ text: 'hello from the corrected transcript', language: 'en-GB', duration_seconds: 3 });

    // Usage: 2 images, 2 + 3 audio seconds, and the records' bytes in storage.
    let usage: Record<string, unknown> = {};
    for (let attempt = 0; attempt < 50; attempt++) {
      usage = (await json('GET', `/v1/projects/${projectId}/usage`)).body;
      if (usage.image_generations === 2 && usage.audio_seconds === 5) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(usage).toMatchObject({ image_generations: 2, audio_seconds: 5 });
    expect(usage.storage_bytes).toBeGreaterThan('hello from the corrected transcript'.length + 'second try'.length);
  });

  it('keeps the upstream key out of every log line', async () => {
    await gateway.stop();
    expect(gateway.logs.some((line) => line.includes('sk-upstream-secret-123'))).toBe(false);
  });
});
