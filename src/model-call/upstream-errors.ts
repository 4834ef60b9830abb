import type { IncomingHttpHeaders } from 'node:http';
import { ApiError, upstreamError, upstreamOverloaded, upstreamTimeout, upstreamUnavailable, type ErrorType } from '../http/errors.js';

/** Why the gateway itself aborted an upstream request (the AbortSignal reason). */
export class ClientGone extends Error {
  constructor() {
    super('client closed the connection');
    this.name = 'ClientGone';
  }
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);

/** Maps a failed request to the backend (no HTTP answer, or a broken one) to the error table. */
export function mapUpstreamFailure(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const code = (error as { code?: string }).code ?? '';
  if (TIMEOUT_CODES.has(code)) return upstreamTimeout();
  if (UNREACHABLE_CODES.has(code) || code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') {
    return upstreamUnavailable();
  }
  return upstreamError('The model backend failed or sent an unreadable reply.');
}

/**
 * A reply that fails after its headers: a connection closed or reset before the body's end cut the
 * reply short, so the gateway has a reply it cannot read (502 `upstream_error`), not an unreachable
 * backend (503); a timeout stays a 504, and the gateway's own refusal (over a limit) itself.
 */
export function replyBrokeOff(error: unknown): ApiError {
  const mapped = mapUpstreamFailure(error);
  return mapped.code === 'upstream_unavailable' ? upstreamError('The model backend broke off its reply.') : mapped;
}

const SAFE_CODE = /^[a-z0-9_]{1,64}$/;

function typeOfStatus(status: number): { type: ErrorType; code: string } {
  if (status === 404) return { type: 'not_found_error', code: 'model_not_found' };
  if (status === 413) return { type: 'invalid_request_error', code: 'payload_too_large' };
  if (status === 429) return { type: 'rate_limit_error', code: 'rate_limit_exceeded' };
  return { type: 'invalid_request_error', code: 'invalid_parameter' };
}

function upstreamMessage(bodyText: string): { message?: string; code?: string; param?: string } {
  try {
    const parsed = JSON.parse(bodyText) as { error?: unknown; message?: unknown; detail?: unknown };
    const error = (typeof parsed.error === 'object' && parsed.error !== null ? parsed.error : parsed) as Record<string, unknown>;
    const message = [error.message, parsed.error, parsed.detail].find((value) => typeof value === 'string') as string | undefined;
    return {
      message,
      code: typeof error.code === 'string' && SAFE_CODE.test(error.code) ? error.code : undefined,
      param: typeof error.param === 'string' ? error.param.slice(0, 128) : undefined,
    };
  } catch {
    return {};
  }
}

/**
 * Maps a non-2xx backend answer: 5xx is a 502 (Anthropic's 529 "overloaded" stays a 529); a 401/403 means the gateway's own upstream
 * credentials are wrong, which is not the client's fault, so it is a 502 as well; any other
 * 4xx keeps its status and the backend's message (429 stays 429, with its Retry-After).
 */
export function mapUpstreamStatus(status: number, headers: IncomingHttpHeaders, bodyText: string): ApiError {
  if (status === 529) return upstreamOverloaded(Number(headers['retry-after']) || 1);
  if (status >= 500 || status < 400) return upstreamError(`The model backend failed (HTTP ${status}).`);
  if (status === 401 || status === 403) return upstreamError('The model backend refused the gateway\'s credentials.');
  const { type, code } = typeOfStatus(status);
  const upstream = upstreamMessage(bodyText);
  const message = (upstream.message ?? `The model backend refused the request (HTTP ${status}).`).slice(0, 2000);
  const extra: Record<string, string> = {};
  if (status === 429) {
    const retryAfter = Number(headers['retry-after']);
    extra['retry-after'] = String(Number.isFinite(retryAfter) && retryAfter >= 1 ? Math.ceil(retryAfter) : 1);
  }
  return new ApiError(status, type, upstream.code ?? code, message, upstream.param, extra);
}

/** Failures another target may fix: unreachable, timed out, 5xx, overloaded (429), misconfigured key. */
export function shouldFallBack(error: ApiError): boolean {
  return error.type === 'upstream_error' || error.statusCode === 429;
}
