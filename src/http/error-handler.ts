import type { FastifyError, FastifyInstance } from 'fastify';
import { ApiError, internalError, invalidParameter, payloadTooLarge, resourceNotFound, storeUnavailable } from './errors.js';
import { describeValidationError, paramOf } from './validation.js';
import { StoreUnavailableError } from '../store/types.js';
import { anthropicErrorBody, anthropicStatus, speaksAnthropic } from './anthropic-errors.js';

const CONTENT_TYPE_CODES = new Set(['FST_ERR_CTP_INVALID_MEDIA_TYPE', 'FST_ERR_CTP_INVALID_TYPE', 'FST_ERR_CTP_INVALID_CONTENT_LENGTH']);

/** Maps whatever was thrown to one ApiError; nothing internal reaches the client. */
export function toApiError(error: unknown, bodyLimit: number): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof StoreUnavailableError) return storeUnavailable();
  const fastifyError = error as FastifyError;
  if (fastifyError.validation?.length) {
    const first = fastifyError.validation[0]!;
    const param = paramOf(first) ?? (fastifyError.validationContext === 'body' ? 'body' : undefined);
    return invalidParameter(describeValidationError(first), param);
  }
  if (fastifyError.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return payloadTooLarge(bodyLimit);
  if (fastifyError.code && CONTENT_TYPE_CODES.has(fastifyError.code)) {
    return invalidParameter('Unsupported Content-Type: send "Content-Type: application/json".', 'content-type');
  }
  if (fastifyError.statusCode === 404) return resourceNotFound('route');
  if (fastifyError.statusCode !== undefined && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return invalidParameter('Malformed request.');
  }
  return internalError();
}

export function installErrorHandling(app: FastifyInstance, bodyLimit: number): void {
  app.setErrorHandler((error, request, reply) => {
    // A route's own limit (model routes: server.model_body_limit_bytes) is what the client passed.
    const apiError = toApiError(error, request.routeOptions.bodyLimit ?? bodyLimit);
    if (error instanceof StoreUnavailableError) {
      // The outage itself is logged once (StoreHealth); each request is counted in nova_redis_errors_total.
      request.log.debug({ cause: (error.cause as Error | undefined)?.message }, 'store unavailable');
    } else if (apiError.statusCode >= 500 && !(error instanceof ApiError)) {
      request.log.error({ err: error }, 'request failed');
    }
    const anthropic = speaksAnthropic(request);
    reply.code(anthropic ? anthropicStatus(apiError) : apiError.statusCode).headers(apiError.headers);
    // Anthropic's shape is sent as written: a route's response schemas describe OpenAI's error shape.
    if (anthropic) reply.type('application/json').send(JSON.stringify(anthropicErrorBody(apiError, request.id)));
    else reply.send(apiError.toBody());
  });
  app.setNotFoundHandler((request, reply) => {
    const error = resourceNotFound('route');
    const message = `No route for ${request.method} ${request.url.split('?')[0]}.`;
    if (speaksAnthropic(request)) return reply.code(404).type('application/json').send(JSON.stringify(anthropicErrorBody(Object.assign(error, { message }), request.id)));
    reply.code(404).send({ error: { ...error.toBody().error, message } });
  });
}
