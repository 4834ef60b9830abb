import type { SpanStatusCode as ApiSpanStatusCode } from '@opentelemetry/api';

/**
 * OpenTelemetry's span status codes (the API's enum values), without loading the API: the request
 * path imports this whether or not tracing is on.
 */
export const SpanStatusCode = { ERROR: 2 as ApiSpanStatusCode.ERROR } as const;
