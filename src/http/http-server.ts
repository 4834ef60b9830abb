import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { GatewayConfig } from '../config/gateway-config.js';
import { ApiError, invalidParameter, requestTimeout } from './errors.js';

type Handler = (request: IncomingMessage, response: ServerResponse) => void;
type ServerSettings = GatewayConfig['server'];

/**
 * The Node server under Fastify, built here so that every client-side bound is set where
 * Node reads it: header and body deadlines (checked every `connectionsCheckingInterval`,
 * which only the constructor takes), the idle keep-alive timeout, a cap on connections per
 * client address, and the end of a connection after an HTTP/1.0 message with Transfer-Encoding.
 */
export function gatewayServerFactory(settings: ServerSettings): (handler: Handler) => Server {
  return (handler) => {
    const shortest = Math.min(settings.headers_timeout_ms, settings.body_timeout_ms);
    const server = createServer(
      {
        headersTimeout: settings.headers_timeout_ms,
        requestTimeout: settings.body_timeout_ms,
        keepAliveTimeout: settings.keep_alive_timeout_ms,
        // A deadline is noticed at most this late: a tenth of the shortest, at most a second.
        connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(shortest / 10))),
      },
      closeAfterHttp10Chunked(handler),
    );
    if (settings.max_connections_per_address > 0) capConnectionsPerAddress(server, settings.max_connections_per_address);
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

/** Beyond the cap, a client address's new connections are closed at once (no bytes read). */
function capConnectionsPerAddress(server: Server, max: number): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    if (address === undefined) return;
    const count = (open.get(address) ?? 0) + 1;
    if (count > max) {
      socket.destroy();
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
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
