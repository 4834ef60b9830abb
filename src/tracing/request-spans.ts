import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SpanStatusCode } from './span-status.js';
import type { Tracing } from './tracing.js';

/** The path without its query string: a query may carry anything a client typed. */
const pathOf = (url: string) => {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
};

/**
 * A server span per request (HTTP semantic conventions), continuing an incoming `traceparent`;
 * ended when the response is done or its client left (the raw response's 'close', as the access
 * log and the quota settlement use). Installed only when tracing is on (src/app.ts).
 */
export function installRequestSpans(app: FastifyInstance, tracing: Tracing): void {
  app.decorateRequest('traceSpan', null);
  app.addHook('onRequest', (request, reply, done) => {
    const span = tracing.startServerSpan(request.method, request.headers);
    request.traceSpan = span;
    // A span its sampler left out still carries the trace's ids (the access log's, the upstream's
    // `traceparent`), but nothing is worth building for it.
    if (span.isRecording()) {
      span.setAttributes({ 'http.request.method': request.method, 'url.path': pathOf(request.url), 'client.address': request.ip });
      reply.raw.once('close', () => endServerSpan(request, reply));
    }
    done();
  });
}

/**
 * One setAttributes call: the SDK checks each call's attributes, so fewer calls cost less. The
 * project and key are on the model-call span, or on a refusal's server span (src/routes/admission-hook.ts).
 */
function endServerSpan(request: FastifyRequest, reply: FastifyReply): void {
  const span = request.traceSpan!;
  const route = request.routeOptions.url;
  const status = reply.raw.statusCode;
  const closed = !reply.raw.writableEnded;
  if (route !== undefined) span.updateName(`${request.method} ${route}`);
  span.setAttributes({
    'http.route': route,
    'http.response.status_code': status,
    'error.type': closed ? 'client_closed' : status >= 500 ? String(status) : undefined,
  });
  if (status >= 500 || closed) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}
