import type { IncomingMessage } from 'node:http';
import { mayHoldSecret, mintId } from '../core/ids.js';

const VALID_REQUEST_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * Keeps a caller's well-formed x-request-id so traces join up; mints one otherwise. An id
 * that could be an API key is never kept: the id is echoed and on every log line.
 */
export function requestIdOf(request: IncomingMessage): string {
  const incoming = request.headers['x-request-id'];
  return typeof incoming === 'string' && VALID_REQUEST_ID.test(incoming) && !mayHoldSecret(incoming) ? incoming : mintId('req');
}
