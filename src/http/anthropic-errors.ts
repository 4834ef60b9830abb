import type { FastifyRequest } from 'fastify';
import type { ApiError } from './errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route speaks Anthropic's API (/v1/messages): its errors and headers take Anthropic's shape. */
    anthropic?: boolean;
  }
}

/**
 * Whether a request is answered in Anthropic's shape: a Messages route, or any /v1 request of an
 * Anthropic SDK (it sends `anthropic-version`), so `models.list` and an auth failure raise the
 * SDK's own error classes.
 */
export function speaksAnthropic(request: FastifyRequest): boolean {
  if (request.routeOptions.config?.anthropic === true) return true;
  return request.headers['anthropic-version'] !== undefined && request.url.startsWith('/v1/');
}

/** The status of a gateway error in Anthropic's terms: backends too busy to take a request are overloaded (529), as Anthropic's own answer. */
export function anthropicStatus(error: ApiError): number {
  return error.code === 'upstream_busy' ? 529 : error.statusCode;
}

/** Anthropic's error type of a gateway error: the SDKs pick their class by status, tools by type. */
export function anthropicErrorType(error: ApiError): string {
  switch (anthropicStatus(error)) {
    case 400:
    case 408:
    case 422:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return error.statusCode < 500 ? 'invalid_request_error' : 'api_error';
  }
}

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: string; message: string };
  request_id: string;
}

export function anthropicErrorBody(error: ApiError, requestId: string): AnthropicErrorBody {
  return { type: 'error', error: { type: anthropicErrorType(error), message: error.message }, request_id: requestId };
}

/** The `event: error` that ends a Messages stream the upstream broke off (the SDKs raise it as an APIError). */
export function anthropicErrorEvent(error: ApiError, requestId: string): string {
  return `event: error\ndata: ${JSON.stringify(anthropicErrorBody(error, requestId))}\n\n`;
}
