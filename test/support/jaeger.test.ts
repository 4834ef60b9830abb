// The Jaeger harness itself (test/support/jaeger.ts): spans POSTed as hand-built OTLP/HTTP JSON with
// plain fetch come back through the query API with their ids, parent, attributes, resource and
// events, so a failing gateway trace test points at the gateway, not at the harness.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startJaeger, type JaegerHarness } from './jaeger.js';

const SERVICE = `nova-jaeger-harness-${randomBytes(4).toString('hex')}`;

function nanos(ms: number): string {
  return `${BigInt(ms) * 1_000_000n}`;
}

describe('Jaeger harness', () => {
  let jaeger: JaegerHarness;

  // The first use builds the binary (scripts/jaeger-binary.mjs): up to half an hour, unless .ci/run did it.
  beforeAll(async () => {
    jaeger = await startJaeger();
  }, 45 * 60_000);
  afterAll(async () => {
    await jaeger?.close();
  });

  it('listens on loopback only', () => {
    for (const url of [jaeger.otlpHttpEndpoint, jaeger.queryUrl]) expect(new URL(url).hostname).toBe('127.0.0.1');
  });

  it('stores spans received over OTLP/HTTP JSON and returns them through the query API', async () => {
    const traceId = randomBytes(16).toString('hex');
    const rootId = randomBytes(8).toString('hex');
    const childId = randomBytes(8).toString('hex');
    const start = Date.now() - 50;
    const payload = {
      resourceSpans: [
        {
          resource: {
            attributes: [
              { key: 'service.name', value: { stringValue: SERVICE } },
              { key: 'service.version', value: { stringValue: '0.1.0' } },
            ],
          },
          scopeSpans: [
            {
              scope: { name: 'nova-harness-test' },
              spans: [
                {
                  traceId,
                  spanId: rootId,
                  name: 'POST /v1/chat/completions',
                  kind: 2,
                  startTimeUnixNano: nanos(start),
                  endTimeUnixNano: nanos(start + 40),
                  attributes: [
                    { key: 'http.request.method', value: { stringValue: 'POST' } },
                    { key: 'http.response.status_code', value: { intValue: '200' } },
                    { key: 'nova.project.id', value: { stringValue: 'prj_test' } },
                  ],
                  status: { code: 1 },
                },
                {
                  traceId,
                  spanId: childId,
                  parentSpanId: rootId,
                  name: 'chat echo',
                  kind: 3,
                  startTimeUnixNano: nanos(start + 5),
                  endTimeUnixNano: nanos(start + 35),
                  attributes: [
                    { key: 'gen_ai.request.model', value: { stringValue: 'echo' } },
                    { key: 'gen_ai.usage.input_tokens', value: { intValue: '12' } },
                    { key: 'nova.streamed', value: { boolValue: true } },
                    { key: 'nova.ratio', value: { doubleValue: 0.5 } },
                  ],
                  events: [{ name: 'first token', timeUnixNano: nanos(start + 10), attributes: [] }],
                  status: { code: 2, message: 'upstream failed' },
                },
              ],
            },
          ],
        },
      ],
    };
    const response = await fetch(jaeger.otlpTracesUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload),
    });
    expect(response.status).toBe(200);
    await response.arrayBuffer();

    const trace = await jaeger.waitForTrace(traceId, { minSpans: 2 });
    expect(trace.traceId).toBe(traceId);
    const root = trace.spans.find((span) => span.spanId === rootId);
    const child = trace.spans.find((span) => span.spanId === childId);
    expect(root).toMatchObject({
      traceId,
      parentSpanId: undefined,
      name: 'POST /v1/chat/completions',
      service: SERVICE,
      startTimeUs: start * 1000,
      durationUs: 40_000,
      resource: { 'service.version': '0.1.0' },
      attributes: {
        'http.request.method': 'POST',
        'http.response.status_code': 200,
        'nova.project.id': 'prj_test',
        'span.kind': 'server',
        'otel.status_code': 'OK',
        'otel.scope.name': 'nova-harness-test',
      },
    });
    expect(child).toMatchObject({
      parentSpanId: rootId,
      name: 'chat echo',
      service: SERVICE,
      attributes: {
        'gen_ai.request.model': 'echo',
        'gen_ai.usage.input_tokens': 12,
        'nova.streamed': true,
        'nova.ratio': 0.5,
        'span.kind': 'client',
        'otel.status_code': 'ERROR',
        'otel.status_description': 'upstream failed',
        error: true,
      },
      events: [{ timeUs: (start + 10) * 1000, attributes: { event: 'first token' } }],
    });

    const traces = await jaeger.traces(SERVICE);
    expect(traces.map((found) => found.traceId)).toEqual([traceId]);
    expect(traces[0]!.spans).toHaveLength(2);
  });

  it('answers undefined for a trace it does not have', async () => {
    expect(await jaeger.trace(randomBytes(16).toString('hex'))).toBeUndefined();
    expect(await jaeger.traces(`${SERVICE}-none`)).toEqual([]);
  });
});
