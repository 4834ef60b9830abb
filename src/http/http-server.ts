import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { GatewayConfig } from '../config/gateway-config.js';
import { ConnectionGuard, type ConnectionEvents, type PressureLog } from './connection-guard.js';
import { ApiError, invalidParameter, requestTimeout } from './errors.js';

type Handler = (request: IncomingMessage, response: ServerResponse) => void;
type ServerSettings = GatewayConfig['server'];

/** Where the server reports connection pressure: metrics (src/metrics/connection-metrics.ts) and the app's logger. */
export interface ServerObservers {
  events?: ConnectionEvents;
  log?: PressureLog;
}

/**
 * The Node server under Fastify, built here so that every client-side bound is set where
 * Node reads it: header and body deadlines (checked every `connectionsCheckingInterval`,
 * which only the constructor takes), the idle keep-alive timeout, and the end of a connection
 * after an HTTP/1.0 message with Transfer-Encoding. connection-guard.ts adds the caps on
 * connections (per address, in total, file descriptors), pipelining and slow bodies.
 */
export function gatewayServerFactory(settings: ServerSettings, observers: ServerObservers = {}): (handler: Handler) => Server {
  return (handler) => {
    const shortest = Math.min(settings.headers_timeout_ms, settings.body_timeout_ms);
    const guard = new ConnectionGuard(
      {
        maxPerAddress: settings.max_connections_per_address,
        maxConnections: settings.max_connections,
        maxPipelined: settings.max_pipelined_requests,
        bodyMinBytesPerSecond: settings.body_min_bytes_per_second,
        bodyMinRateGraceMs: settings.body_min_rate_grace_ms,
      },
      observers.events,
      observers.log,
    );
    const server = createServer(
      {
        headersTimeout: settings.headers_timeout_ms,
        requestTimeout: settings.body_timeout_ms,
        keepAliveTimeout: settings.keep_alive_timeout_ms,
        // A deadline is noticed at most this late: a tenth of the shortest, at most a second.
        connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(shortest / 10))),
      },
      guard.wrap(closeAfterHttp10Chunked(handler)),
    );
    guard.install(server);
    return server;
  };
}

/**
 * RFC 9112 §6.1: a message with Transfer-Encoding in HTTP/1.0 ends the connection, because
 * an intermediary may have framed it differently. Node parses it as chunked and would go on
 * to read the next request from the same bytes: that request is never handled, and the
 * connection closes once the first response is sent.
 */
function closeAfterHttp10Chunked(handler: Handler): Handler {
  const lastMessageOf = new WeakMap<Socket, IncomingMessage>();
  return (request, response) => {
    const last = lastMessageOf.get(request.socket);
    if (last !== undefined && last !== request) return;
    if (request.httpVersion === '1.0' && request.headers['transfer-encoding'] !== undefined) {
      lastMessageOf.set(request.socket, request);
      response.setHeader('connection', 'close');
    }
    handler(request, response);
  };
}

/**
 * Errors Node raises before or while reading a request (a deadline passed, a malformed
 * message, headers too large), answered in the error envelope, and the connection closed.
 * Nothing is written once a response has begun on the socket: that would corrupt it.
 */
export function clientErrorHandler(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const apiError =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? requestTimeout()
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? new ApiError(431, 'invalid_request_error', 'invalid_parameter', 'The request headers are too large.', 'headers')
        : invalidParameter('Malformed HTTP request.');
  this.log.debug({ code: error.code, client_address: socket.remoteAddress }, 'client error');
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const body = JSON.stringify(apiError.toBody());
    socket.write(
      `HTTP/1.1 ${apiError.statusCode} ${STATUS_CODES[apiError.statusCode]}\r\n` +
        'content-type: application/json; charset=utf-8\r\n' +
        `content-length: ${Buffer.byteLength(body)}\r\n` +
        'connection: close\r\n\r\n' +
        body,
    );
    // Closes once the answer is flushed; a bare destroy() could discard it.
    (socket as Socket & { destroySoon(): void }).destroySoon();
    return;
  }
  socket.destroy();
}
