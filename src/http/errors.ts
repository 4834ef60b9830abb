/**
 * The one error module: every error the gateway answers is an ApiError, and
 * every framework or library failure is mapped to one here.
 */
export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'insufficient_quota'
  | 'upstream_error'
  | 'service_unavailable'
  | 'api_error';

export interface ErrorBody {
  error: { message: string; type: ErrorType; code: string; param?: string };
}

export class ApiError extends Error {
  readonly headers: Record<string, string>;
  constructor(
    readonly statusCode: number,
    readonly type: ErrorType,
    readonly code: string,
    message: string,
    readonly param?: string,
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.headers = headers;
  }

  toBody(): ErrorBody {
    const error: ErrorBody['error'] = { message: this.message, type: this.type, code: this.code };
    if (this.param !== undefined) error.param = this.param;
    return { error };
  }
}

export const invalidParameter = (message: string, param?: string) =>
  new ApiError(400, 'invalid_request_error', 'invalid_parameter', message, param);

export const missingApiKey = () =>
  new ApiError(401, 'authentication_error', 'missing_api_key', 'Missing API key: send "Authorization: Bearer <API_KEY>" or "x-api-key: <API_KEY>".');

export const conflictingApiKeys = () =>
  new ApiError(401, 'authentication_error', 'invalid_api_key', 'The request sends two different API keys (Authorization and x-api-key); send one.');

export const invalidApiKey = () =>
  new ApiError(401, 'authentication_error', 'invalid_api_key', 'Invalid API key.');

export const expiredApiKey = () =>
  new ApiError(401, 'authentication_error', 'expired_api_key', 'The API key has expired.');

export const invalidAdminToken = () =>
  new ApiError(401, 'authentication_error', 'invalid_api_key', 'Invalid admin token.');

export const invalidConsoleToken = () =>
  new ApiError(401, 'authentication_error', 'invalid_api_key', 'The token is neither the admin token nor a valid API key.', 'token');

export const noConsoleSession = () =>
  new ApiError(401, 'authentication_error', 'session_required', 'No console session, or it has expired: sign in again.');

export const invalidCsrfToken = () =>
  new ApiError(403, 'permission_error', 'csrf_token_invalid', "A call made with a console session must carry that session's x-csrf-token header.", 'x-csrf-token');

export const consoleNotBuilt = () =>
  new ApiError(503, 'service_unavailable', 'console_not_built', 'The web console is not built in this installation: run `npm run build`.');

export const projectMismatch = (param = 'project_id') =>
  new ApiError(403, 'permission_error', 'project_mismatch', 'The API key does not belong to this project.', param);

/** A key outside its scopes (src/auth/key-access.ts): the message names the scope it lacks. */
export const insufficientScope = (scope: string, param?: string) =>
  new ApiError(403, 'permission_error', 'insufficient_scope', `This API key lacks the scope '${scope}'.`, param);

export const modelNotAllowed = (model: string, param = 'model') =>
  new ApiError(403, 'permission_error', 'model_not_allowed', `This API key may not use the model '${model.slice(0, 256)}'.`, param);

export const resourceNotFound = (what: string, param?: string) =>
  new ApiError(404, 'not_found_error', 'resource_not_found', `No such ${what}.`, param);

export const modelNotFound = (param = 'model') =>
  new ApiError(404, 'not_found_error', 'model_not_found', 'The model does not exist or is not available to this project.', param);

export const payloadTooLarge = (limitBytes: number) =>
  new ApiError(413, 'invalid_request_error', 'payload_too_large', `Request body exceeds the limit of ${limitBytes} bytes.`);

/** The request (headers or body) did not arrive within server.headers_timeout_ms / body_timeout_ms. */
export const requestTimeout = () =>
  new ApiError(408, 'invalid_request_error', 'request_timeout', 'The request did not arrive in time.', undefined, {
    connection: 'close',
  });

export const rateLimitExceeded = (retryAfterSeconds: number, message = 'Rate limit exceeded for this project.') =>
  new ApiError(429, 'rate_limit_error', 'rate_limit_exceeded', message, undefined, {
    'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))),
  });

/** The project's stored conversations reached their bound: retrying cannot help until room is freed. */
export const storageQuotaExceeded = (maxBytes: number) =>
  new ApiError(
    429,
    'insufficient_quota',
    'storage_quota_exceeded',
    `The project's stored conversations have reached their limit of ${maxBytes} bytes; delete conversations or send store: false.`,
    'store',
    { 'x-should-retry': 'false' },
  );

export const concurrencyLimitExceeded = (retryAfterSeconds: number, message: string) =>
  new ApiError(429, 'rate_limit_error', 'concurrency_limit_exceeded', message, undefined, {
    'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))),
  });

/** A budget is spent until its period ends: the official SDKs do not retry (x-should-retry: false). */
export const insufficientQuota = (retryAfterSeconds: number, message: string) =>
  new ApiError(429, 'insufficient_quota', 'insufficient_quota', message, undefined, {
    'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))),
    'x-should-retry': 'false',
  });

/** The model backend answered with a failure (5xx, or a reply the gateway cannot use). */
export const upstreamError = (message = 'The model backend failed.') =>
  new ApiError(502, 'upstream_error', 'upstream_error', message);

/** The model backend could not be reached (connection refused, reset, DNS). */
export const upstreamUnavailable = (message = 'The model backend is unavailable; retry later.') =>
  new ApiError(503, 'upstream_error', 'upstream_unavailable', message);

/** The model backend did not answer within the model's timeout_ms. */
/** The backend is overloaded (Anthropic's 529): another target may take it, else the client retries. */
export const upstreamOverloaded = (retryAfterSeconds: number) =>
  new ApiError(529, 'upstream_error', 'upstream_overloaded', 'The model backend is overloaded; retry later.', undefined, {
    'retry-after': String(Math.max(1, Math.ceil(retryAfterSeconds))),
  });

export const upstreamTimeout = (message = 'The model backend did not answer in time.') =>
  new ApiError(504, 'upstream_error', 'upstream_timeout', message);

export const storeUnavailable = (message = 'The gateway store is unavailable; retry later.') =>
  new ApiError(503, 'service_unavailable', 'store_unavailable', message);

export const shuttingDown = () =>
  new ApiError(503, 'service_unavailable', 'shutting_down', 'The gateway is shutting down; retry on another replica.', undefined, {
    connection: 'close',
  });

export const internalError = () =>
  new ApiError(500, 'api_error', 'internal_error', 'Internal error.');
