import { defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, SpanKind, trace, type Attributes, type Span } from '@opentelemetry/api';
import { setGlobalErrorHandler, W3CTraceContextPropagator } from '@opentelemetry/core';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import type { Tracing } from './tracing.js';
import type { TracingSettings } from './tracing-settings.js';

/** One warning a minute at most: an unreachable collector fails every export. */
const ERROR_LOG_INTERVAL_MS = 60_000;

function samplerOf({ name, ratio }: TracingSettings['sampler']): Sampler {
  const root = name.endsWith('always_off') ? new AlwaysOffSampler() : name.endsWith('traceidratio') ? new TraceIdRatioBasedSampler(ratio) : new AlwaysOnSampler();
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root;
}

/**
 * The OTLP/HTTP exporter of the protocol; each reads its endpoint, headers, timeout and compression
 * from the OTEL_EXPORTER_OTLP_* variables. Protobuf is the SDK's exporter with our encoder in place of
 * its serializer (src/tracing/otlp-span-encoder.ts: the same bytes for a third of the CPU).
 */
async function exporterOf(protocol: TracingSettings['protocol']): Promise<SpanExporter> {
  if (protocol === 'http/json') return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
  const [{ OTLPExporterBase }, { convertLegacyHttpOptions, createOtlpHttpExportDelegate }, { ProtobufTraceSerializer, TraceExporterMetricsHelper }, { encodeSpans }] =
    await Promise.all([
      import('@opentelemetry/otlp-exporter-base'),
      import('@opentelemetry/otlp-exporter-base/node-http'),
      import('@opentelemetry/otlp-transformer'),
      import('./otlp-span-encoder.js'),
    ]);
  const serializer = { serializeRequest: encodeSpans, deserializeResponse: ProtobufTraceSerializer.deserializeResponse };
  const options = convertLegacyHttpOptions({}, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' });
  // The component type names the exporter in the SDK's own metrics, which the gateway does not turn on.
  return new OTLPExporterBase(createOtlpHttpExportDelegate(options, serializer, 'otlp_http_span_exporter', TraceExporterMetricsHelper, undefined));
}

const definedOnly = <T extends object>(values: T): Partial<T> => Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined)) as Partial<T>;

/**
 * The OpenTelemetry SDK behind `Tracing`: a batch processor exporting over OTLP/HTTP. Spans are
 * parented explicitly (the request's span is carried on the request), so no context manager runs
 * on every asynchronous step.
 */
export async function startTracing(
  settings: TracingSettings,
  version: string,
  warn: (message: string, error: unknown) => void,
  exporter?: SpanExporter,
): Promise<Tracing> {
  let lastWarned = 0;
  setGlobalErrorHandler((error) => {
    const now = Date.now();
    if (now - lastWarned < ERROR_LOG_INTERVAL_MS) return;
    lastWarned = now;
    warn('trace export failed (further failures in the next minute are not logged)', error);
  });
  const resource = resourceFromAttributes({ 'service.name': 'nova-gateway', 'service.version': version }).merge(detectResources({ detectors: [envDetector] }));
  const provider = new TracerProvider({
    resource,
    sampler: samplerOf(settings.sampler),
    spanProcessors: [new BatchSpanProcessor({ exporter: exporter ?? (await exporterOf(settings.protocol)), ...definedOnly(settings.batch) })],
  });
  const tracer = provider.getTracer('nova-gateway', version);
  const propagator = new W3CTraceContextPropagator();
  // Attributes go on after the start: the SDK checks a start's attributes twice (for the sampler, then
  // for the span), setAttributes once, and the samplers here read none.
  return {
    startServerSpan(name, headers) {
      const parent = headers.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
      return tracer.startSpan(name, { kind: SpanKind.SERVER }, parent);
    },
    startChildSpan(parent, name, kind, attributes: Attributes): Span {
      return tracer.startSpan(name, { kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL }, trace.setSpan(ROOT_CONTEXT, parent)).setAttributes(attributes);
    },
    inject(span, headers) {
      propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter);
    },
    shutdown: () => provider.shutdown(),
  };
}
