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
    request.traceSpan = tracing.startServerSpan(request.method, request.headers, {
      'http.request.method': request.method,
      'url.path': pathOf(request.url),
      'url.scheme': request.protocol,
      'client.address': request.ip,
    });
    reply.raw.once('close', () => endServerSpan(request, reply));
    done();
  });
}

function endServerSpan(request: FastifyRequest, reply: FastifyReply): void {
  const span = request.traceSpan!;
  const route = request.routeOptions.url;
  if (route !== undefined) {
    span.updateName(`${request.method} ${route}`);
    span.setAttribute('http.route', route);
  }
  const status = reply.raw.statusCode;
  span.setAttribute('http.response.status_code', status);
  if (request.principal) span.setAttributes({ 'nova.project.id': request.principal.projectId, 'nova.api_key.id': request.principal.keyId });
  if (!reply.raw.writableEnded) span.setAttributes({ 'error.type': 'client_closed' });
  else if (status >= 500) span.setAttributes({ 'error.type': String(status) });
  if (status >= 500 || !reply.raw.writableEnded) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}
