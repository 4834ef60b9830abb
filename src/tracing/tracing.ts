import type { IncomingHttpHeaders } from 'node:http';
import type { Attributes, Span } from '@opentelemetry/api';

/**
 * Traces (docs/tracing.md): what the app and the model call ask of them. Only types here: with
 * tracing off nothing of OpenTelemetry is loaded, and `ctx.tracing` is null on every path.
 */
export interface Tracing {
  /** The server span of an incoming request, continuing its `traceparent` when it has one. */
  startServerSpan(name: string, headers: IncomingHttpHeaders): Span;
  /** A span under `parent`: a model call (internal) or an upstream attempt (client). */
  startChildSpan(parent: Span, name: string, kind: 'internal' | 'client', attributes: Attributes): Span;
  /** Writes `span`'s `traceparent` (and `tracestate`) into outgoing headers, so the backend's spans join the trace. */
  inject(span: Span, headers: Record<string, string>): void;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

export type { Span };

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's server span (src/tracing/request-spans.ts); null when tracing is off. */
    traceSpan: Span | null;
  }
}
