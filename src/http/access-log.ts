import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import '../tracing/tracing.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Fields a route adds to the request's one access-log line (model, tokens, outcome, …). */
    logFields: Record<string, unknown> | null;
    accessLogged: boolean;
  }
}

const MESSAGE = 'request completed';

/**
 * One log line per request, written when the response is done, with what the route added.
 * (Fastify's own pair of lines, "incoming request" and "request completed", is switched off:
 * at gateway rates the second line is pure cost.)
 */
export function installAccessLog(app: FastifyInstance): void {
  app.decorateRequest('logFields', null);
  app.decorateRequest('accessLogged', false);
  // Callback hooks: an async one costs every request a promise and a microtask for nothing.
  app.addHook('onResponse', (request, reply, done) => {
    request.accessLogged = true;
    const log = request.log as FastifyBaseLogger & Partial<Pick<Logger, 'isLevelEnabled'>>;
    if (log.isLevelEnabled && !log.isLevelEnabled('info')) return done();
    // A route field of the same key as a base field takes its place; undefined values (no
    // principal, a connection gone before the response ended) are left out by pino.
    const fields = {
      method: request.method,
      route: request.routeOptions.url ?? null,
      status_code: reply.statusCode,
      response_time_ms: Math.round(reply.elapsedTime * 100) / 100,
      project_id: request.principal?.projectId,
      client_address: request.ip,
      // With tracing on (src/tracing/request-spans.ts): the line finds its trace, and the trace its line.
      trace_id: request.traceSpan?.spanContext().traceId,
      span_id: request.traceSpan?.spanContext().spanId,
      ...request.logFields,
    };
    log.info(fields, MESSAGE);
    done();
  });
}

/** Adds fields to the access line; after it was written (an aborted stream ending late), logs them alone. */
export function addLogFields(request: FastifyRequest, fields: Record<string, unknown>, message: string): void {
  if (request.accessLogged) request.log.info(fields, message);
  // The first fields are kept as given (the caller's own object), later ones merged into them.
  else request.logFields = request.logFields === null ? fields : Object.assign(request.logFields, fields);
}
