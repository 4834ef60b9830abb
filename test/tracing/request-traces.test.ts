import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { startTracing } from '../../src/tracing/otel-tracing.js';
import { tracingSettingsOf, TracingSettingsError } from '../../src/tracing/tracing-settings.js';
import type { Tracing } from '../../src/tracing/tracing.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { chatConfig, chatEnv } from '../support/chat-fixtures.js';
import { buildTestApp, createProject, type TestApp, type TestProject } from '../support/test-app.js';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: Record<string, unknown> }[];
  status?: { code?: number };
}

/** An in-process OTLP/HTTP JSON receiver: the spans the gateway exported. */
async function otlpReceiver(): Promise<{ server: Server; url: string; spans: OtlpSpan[] }> {
  const spans: OtlpSpan[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] };
      for (const resource of body.resourceSpans) for (const scope of resource.scopeSpans) spans.push(...scope.spans);
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans };
}

const attributesOf = (span: OtlpSpan) =>
  Object.fromEntries(
    span.attributes.map(({ key, value }) => {
      const scalar = value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue;
      return [key, scalar === undefined ? value.arrayValue : String(scalar)];
    }),
  );

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';
const UNSAMPLED_TRACE_ID = '5cf92f3577b34da6a3ce929d0e0e4737';

describe('traces of a model request (OTLP/HTTP JSON to an in-process receiver)', () => {
  let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
  let upstream: LoopbackUpstream;
  let tracing: Tracing;
  let test: TestApp;
  let project: TestProject;
  const lines: Record<string, unknown>[] = [];

  beforeAll(async () => {
    receiver = await otlpReceiver();
    upstream = await LoopbackUpstream.start();
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '50' };
    Object.assign(process.env, env);
    try {
      tracing = await startTracing(tracingSettingsOf(process.env)!, '0.0.0-test', () => {});
    } finally {
      for (const name of Object.keys(env)) delete process.env[name];
    }
    const logger = pino({ level: 'info' }, new Writable({ write: (chunk, _encoding, done) => (lines.push(JSON.parse(String(chunk))), done()) }));
    test = await buildTestApp('memory', { config: chatConfig(upstream), deps: { env: chatEnv, tracing, logger } });
    project = await createProject(test.app, { name: 'traced', requests_per_minute: 2, burst_limit: 0 });
  });

  afterAll(async () => {
    await test?.close();
    await tracing?.shutdown();
    await upstream?.close();
    receiver?.server.close();
  });

  it('joins the client, the gateway and the upstream in one trace, with the GenAI attributes, and logs the trace id', async () => {
    const chat = (auth: Record<string, string>, traceparent?: string) =>
      test.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...auth, ...(traceparent && { traceparent }) }, payload: { model: 'fake-1', messages: [{ role: 'user', content: 'hi' }] } });
    const response = await chat(project.auth, `00-${TRACE_ID}-${CLIENT_SPAN}-01`);
    expect(response.statusCode).toBe(200);
    // A refusal: two requests a minute, no burst.
    await chat(project.auth);
    const refused = await chat(project.auth);
    expect(refused.statusCode).toBe(429);
    // One its client left out of sampling (flags 00), through a project with room.
    const roomy = await createProject(test.app, { name: 'unsampled', requests_per_minute: 100 });
    const unsampled = await chat(roomy.auth, `00-${UNSAMPLED_TRACE_ID}-${CLIENT_SPAN}-00`);
    expect(unsampled.statusCode).toBe(200);
    await tracing.shutdown();

    const inTrace = receiver.spans.filter((span) => span.traceId === TRACE_ID);
    const server = inTrace.find((span) => span.kind === 2)!;
    const call = inTrace.find((span) => span.name === 'chat fake-1')!;
    const attempt = inTrace.find((span) => span.kind === 3)!;
    expect(server.parentSpanId).toBe(CLIENT_SPAN);
    expect(server.name).toBe('POST /v1/chat/completions');
    expect(attributesOf(server)).toMatchObject({ 'http.response.status_code': '200', 'http.route': '/v1/chat/completions' });
    expect(call.parentSpanId).toBe(server.spanId);
    expect(attributesOf(call)).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'fake-1',
      'gen_ai.response.model': 'fake/model-1',
      'nova.project.id': project.projectId,
      'nova.api_key.id': project.keyId,
      'nova.admission.outcome': 'admitted',
    });
    expect(Number(attributesOf(call)['gen_ai.usage.input_tokens'])).toBeGreaterThan(0);
    expect(attempt.parentSpanId).toBe(call.spanId);
    expect(attributesOf(attempt)).toMatchObject({ 'server.address': '127.0.0.1', 'http.response.status_code': '200' });
    // The upstream was told the attempt's span: its own spans join the trace under it.
    const seen = upstream.requests.find((request) => request.route === '/chat/completions')!;
    expect(seen.headers.traceparent).toBe(`00-${TRACE_ID}-${attempt.spanId}-01`);

    const refusedSpan = receiver.spans.find((span) => attributesOf(span)['nova.admission.outcome'] === 'refused')!;
    expect(attributesOf(refusedSpan)).toMatchObject({
      'nova.admission.refused_by': 'requests',
      'nova.admission.level': 'project',
      'nova.project.id': project.projectId,
      'http.response.status_code': '429',
    });

    const access = lines.find((line) => line.msg === 'request completed' && line.route === '/v1/chat/completions' && line.status_code === 200)!;
    expect(access).toMatchObject({ trace_id: TRACE_ID, span_id: server.spanId });
    expect(JSON.stringify(receiver.spans)).not.toContain(project.secret);

    // Left out of sampling: no span exported, but the trace goes on to the upstream, not sampled,
    // under the gateway's own span id, the one its access line names.
    expect(receiver.spans.filter((span) => span.traceId === UNSAMPLED_TRACE_ID)).toEqual([]);
    const unsampledLine = lines.find((line) => line.msg === 'request completed' && line.trace_id === UNSAMPLED_TRACE_ID)!;
    expect(unsampledLine.span_id).toMatch(/^[0-9a-f]{16}$/);
    expect(unsampledLine.span_id).not.toBe(CLIENT_SPAN);
    const passedOn = upstream.requests.filter((request) => String(request.headers.traceparent).includes(UNSAMPLED_TRACE_ID));
    expect(passedOn.map((request) => request.headers.traceparent)).toEqual([`00-${UNSAMPLED_TRACE_ID}-${String(unsampledLine.span_id)}-00`]);
  });
});

describe('tracing settings from the OTEL_* variables', () => {
  it('is off without an endpoint, when disabled, or with the exporter none', () => {
    expect(tracingSettingsOf({})).toBeNull();
    expect(tracingSettingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).toBeNull();
    expect(tracingSettingsOf({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces', OTEL_TRACES_EXPORTER: 'none' })).toBeNull();
  });

  it('reads the protocol, sampler and batch settings, and names a bad variable', () => {
    expect(tracingSettingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25', OTEL_BSP_MAX_QUEUE_SIZE: '4096' })).toMatchObject({
      protocol: 'http/protobuf',
      sampler: { name: 'parentbased_traceidratio', ratio: 0.25 },
      batch: { maxQueueSize: 4096 },
    });
    expect(() => tracingSettingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(TracingSettingsError);
    expect(() => tracingSettingsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
  });
});
