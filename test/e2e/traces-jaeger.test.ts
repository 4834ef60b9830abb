import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, SpanKind, trace, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { startJaeger, type JaegerHarness, type JaegerSpan } from '../support/jaeger.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const UPSTREAM_KEY = `sk-upstream-${randomBase62(24)}`;
const GATEWAY_SERVICE = `nova-e2e-${randomBase62(6)}`;
const propagator = new W3CTraceContextPropagator();

/** A tracer of the test process exporting to Jaeger as `service`: the client's, and the backend's. */
function tracerOf(jaeger: JaegerHarness, service: string): { tracer: Tracer; provider: TracerProvider } {
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': service }),
    spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url: jaeger.otlpTracesUrl }) })],
  });
  return { tracer: provider.getTracer('e2e'), provider };
}

const byName = (spans: JaegerSpan[], name: string) => spans.find((span) => span.name === name);

/**
 * DESIGN.md section 12 against a real Jaeger v2 (test/support/jaeger.ts) and the real gateway process
 * exporting over OTLP/HTTP protobuf: one trace joins the client's span, the gateway's and the
 * backend's, which got the gateway's traceparent.
 */
describe('traces in a real Jaeger: client, gateway and backend in one trace', () => {
  let jaeger: JaegerHarness;
  let upstream: LoopbackUpstream;
  let gateway: GatewayProcess;
  let client: OpenAI;
  let projectId: string;
  let keyId: string;
  let secret: string;
  const providers: TracerProvider[] = [];

  beforeAll(async () => {
    jaeger = await startJaeger({ timeoutMs: 60_000 });
    upstream = await LoopbackUpstream.start({ default: { chunks: ['Traced', ' reply.'] } });
    gateway = await GatewayProcess.start({
      env: {
        REDIS_URL: inject('redisUrl'),
        NOVA_ADMIN_TOKEN: ADMIN_TOKEN,
        E2E_UPSTREAM_KEY: UPSTREAM_KEY,
        OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpHttpEndpoint,
        OTEL_SERVICE_NAME: GATEWAY_SERVICE,
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
      configYaml: `
models:
  - id: vllm-chat
    upstream: ${upstream.baseUrl('default')}
    upstream_model: Qwen/Qwen3-8B
    api_key_env: E2E_UPSTREAM_KEY
redis:
  key_prefix: e2e${randomBase62(8)}
`,
    });
    const project = await gateway.createProject({ name: 'traced', rate_limits: { requests_per_minute: 2, burst_limit: 0 } });
    ({ projectId, keyId, secret } = project);
    client = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: secret, maxRetries: 0 });
  }, 240_000);

  afterAll(async () => {
    await gateway?.stop();
    await Promise.all(providers.map((provider) => provider.shutdown()));
    await upstream?.close();
    await jaeger?.close();
  });

  it('holds the client span, the gateway server, model-call and attempt spans, and the backend span', async () => {
    const clientSide = tracerOf(jaeger, 'e2e-client');
    const backendSide = tracerOf(jaeger, 'e2e-vllm');
    providers.push(clientSide.provider, backendSide.provider);

    const clientSpan = clientSide.tracer.startSpan('ask the model', { kind: SpanKind.CLIENT });
    const headers: Record<string, string> = {};
    propagator.inject(trace.setSpan(ROOT_CONTEXT, clientSpan), headers, defaultTextMapSetter);
    const stream = await client.chat.completions.create(
      { model: 'vllm-chat', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'trace me' }] },
      { headers },
    );
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toBe('Traced reply.');
    clientSpan.end();

    // The backend's own instrumentation: a span under the traceparent the gateway sent it.
    const received = upstream.requests.find((request) => request.route === '/chat/completions')!;
    expect(received.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const parent = propagator.extract(ROOT_CONTEXT, received.headers, defaultTextMapGetter);
    backendSide.tracer.startSpan('llm_request', { kind: SpanKind.SERVER, attributes: { 'gen_ai.request.model': 'Qwen/Qwen3-8B' } }, parent).end();

    const traceId = clientSpan.spanContext().traceId;
    const { spans } = await jaeger.waitForTrace(traceId, { minSpans: 5, timeoutMs: 20_000 }).catch(async (error: unknown) => {
      const found = await jaeger.trace(traceId);
      throw new Error(`${String(error)}: ${JSON.stringify(found?.spans.map((span) => [span.service, span.name]))}`);
    });
    const server = byName(spans, 'POST /v1/chat/completions')!;
    const call = byName(spans, 'chat vllm-chat')!;
    const attempt = spans.find((span) => span.service === GATEWAY_SERVICE && span.attributes['span.kind'] === 'client')!;
    const backend = byName(spans, 'llm_request')!;
    expect(server.service).toBe(GATEWAY_SERVICE);
    expect(server.parentSpanId).toBe(clientSpan.spanContext().spanId);
    expect(server.attributes).toMatchObject({ 'http.response.status_code': 200, 'http.route': '/v1/chat/completions' });
    expect(call.parentSpanId).toBe(server.spanId);
    expect(call.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'vllm-chat',
      'gen_ai.response.model': 'Qwen/Qwen3-8B',
      'nova.project.id': projectId,
      'nova.api_key.id': keyId,
      'nova.admission.outcome': 'admitted',
      'nova.stream': true,
    });
    expect(call.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
    expect(attempt.parentSpanId).toBe(call.spanId);
    expect(attempt.attributes).toMatchObject({ 'http.response.status_code': 200, 'server.address': '127.0.0.1', 'server.port': Number(new URL(upstream.baseUrl('default')).port) });
    expect(received.headers.traceparent).toBe(`00-${traceId}-${attempt.spanId}-01`);
    expect(backend.service).toBe('e2e-vllm');
    expect(backend.parentSpanId).toBe(attempt.spanId);
    expect(JSON.stringify(spans)).not.toContain(secret);
    expect(JSON.stringify(spans)).not.toContain(UPSTREAM_KEY);

    // The access line names the same trace.
    const line = await gateway.waitForLog((entry) => entry.includes('"request completed"') && entry.includes('/v1/chat/completions'));
    expect(JSON.parse(line)).toMatchObject({ trace_id: traceId, span_id: server.spanId });
  }, 60_000);

  it('marks a refused request with the limit that refused it', async () => {
    for (let sent = 0; sent < 2; sent++) {
      await client.chat.completions.create({ model: 'vllm-chat', messages: [{ role: 'user', content: 'fill the minute' }] }).catch(() => undefined);
    }
    const refused = await client.chat.completions.create({ model: 'vllm-chat', messages: [{ role: 'user', content: 'one too many' }] }).catch((error: unknown) => error);
    expect((refused as { status?: number }).status).toBe(429);
    const deadline = Date.now() + 20_000;
    let span: JaegerSpan | undefined;
    while (!span && Date.now() < deadline) {
      const traces = await jaeger.traces(GATEWAY_SERVICE);
      span = traces.flatMap((found) => found.spans).find((candidate) => candidate.attributes['nova.admission.outcome'] === 'refused');
      if (!span) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(span?.attributes).toMatchObject({ 'nova.admission.refused_by': 'requests', 'nova.admission.level': 'project', 'http.response.status_code': 429 });
  }, 60_000);
});
