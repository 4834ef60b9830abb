import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Attributes } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { encodeSpans } from '../../src/tracing/otlp-span-encoder.js';

/** Ended spans from a real SDK provider of `resource`, made by `make`. */
function spansOf(make: (provider: TracerProvider) => void, resource: Attributes = { 'service.name': 'nova-gateway' }): ReadableSpan[] {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ resource: resourceFromAttributes(resource), spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  make(provider);
  return exporter.getFinishedSpans();
}

const official = (spans: ReadableSpan[]) => Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
const ours = (spans: ReadableSpan[]) => Buffer.from(encodeSpans(spans));

/**
 * src/tracing/otlp-span-encoder.ts writes the export request the SDK's own protobuf serializer
 * writes, byte for byte: every field, attribute value type and length class it can meet.
 */
describe('the OTLP/protobuf span encoder', () => {
  it('writes the bytes the SDK serializer writes, for every kind of attribute value, event, link and status', () => {
    const remote = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED, isRemote: true, traceState: new TraceState('vendor=a,other=b') };
    const spans = spansOf((provider) => {
      const tracer = provider.getTracer('nova-gateway', '1.2.3');
      const server = tracer.startSpan('POST /v1/chat/completions', { kind: SpanKind.SERVER }, trace.setSpanContext(ROOT_CONTEXT, remote));
      server.setAttributes({
        ascii: 'POST',
        accents: 'réponse 模型 🙂',
        long: 'x'.repeat(200),
        longer: 'y'.repeat(20_000),
        empty: '',
        yes: true,
        no: false,
        zero: 0,
        small: 42,
        negative: -7,
        large: 2 ** 40,
        huge: 2 ** 60,
        fraction: 0.125,
        notFinite: Infinity,
        strings: ['a', 'b', 'ç'],
        numbers: [1, 2.5, -3],
        bytes: new Uint8Array([0, 1, 255]) as unknown as string,
      });
      server.addEvent('queued', { 'nova.queue.depth': 3 });
      server.addLink({ context: { ...remote, spanId: '00f067aa0ba902b7' }, attributes: { why: 'retry' } });
      const call = tracer.startSpan('chat gpt-4o', { kind: SpanKind.INTERNAL }, trace.setSpan(ROOT_CONTEXT, server));
      call.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream 502' });
      call.end();
      tracer.startSpan('POST', { kind: SpanKind.CLIENT }, trace.setSpan(ROOT_CONTEXT, call)).end();
      provider.getTracer('another-scope').startSpan('GET /readyz', { kind: SpanKind.PRODUCER }).end();
      server.setStatus({ code: SpanStatusCode.OK });
      server.end();
    });
    expect(spans).toHaveLength(4);
    expect(ours(spans).equals(official(spans))).toBe(true);
  });

  it('writes the same bytes for a batch long enough that every enclosing length takes three bytes', () => {
    const spans = spansOf((provider) => {
      const tracer = provider.getTracer('nova-gateway');
      for (let i = 0; i < 600; i++) tracer.startSpan(`chat model-${i}`, { attributes: { 'gen_ai.usage.input_tokens': i, 'nova.project.id': `proj_${i}` } }).end();
    });
    const bytes = ours(spans);
    expect(bytes.length).toBeGreaterThan(2 ** 14);
    expect(bytes.equals(official(spans))).toBe(true);
  });

  it('writes the resource with its schema-less attributes, and nothing for an empty batch', () => {
    const spans = spansOf((provider) => provider.getTracer('t').startSpan('one').end(), { 'service.name': 'nova-gateway', 'service.version': '0.1.0', 'deployment.environment.name': 'prod' });
    expect(ours(spans).equals(official(spans))).toBe(true);
    expect(ours([]).equals(official([]))).toBe(true);
  });
});
