import type { FastifyInstance, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** Fields a route adds to the request's one access-log line (model, tokens, outcome, …). */
    logFields: Record<string, unknown> | null;
    accessLogged: boolean;
  }
}

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
    request.log.info(
      {
        method: request.method,
        route: request.routeOptions.url ?? null,
        status_code: reply.statusCode,
        response_time_ms: Math.round(reply.elapsedTime * 100) / 100,
        project_id: request.principal?.projectId,
        client_address: request.ip,
        ...request.logFields,
      },
      'request completed',
    );
    done();
  });
}

/** Adds fields to the access line; after it was written (an aborted stream ending late), logs them alone. */
export function addLogFields(request: FastifyRequest, fields: Record<string, unknown>, message: string): void {
  if (request.accessLogged) request.log.info(fields, message);
  else request.logFields = { ...request.logFields, ...fields };
}
