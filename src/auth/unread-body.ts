import type { IncomingMessage } from 'node:http';
import type { FastifyReply } from 'fastify';

/**
 * Whether a request announced a body that has not fully arrived. Authentication answers from the
 * headers alone (onRequest), so such a body is unread when a refusal is sent.
 */
export function hasUnreadBody(request: IncomingMessage): boolean {
  if (request.complete) return false;
  if (request.headers['transfer-encoding'] !== undefined) return true;
  const length = request.headers['content-length'];
  return length !== undefined && !/^\s*0*\s*$/.test(length);
}

/**
 * A refusal sent before the body was read ends the connection: otherwise Node reads the rest
 * of the body to reuse it (`_dump`), which is the work an unauthenticated client must not cause.
 */
export function closeIfBodyUnread(reply: FastifyReply): void {
  if (hasUnreadBody(reply.request.raw)) reply.header('connection', 'close');
}
