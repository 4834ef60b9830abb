import type { FastifyRequest } from 'fastify';
import type { AuthenticatedKey } from '../auth/key-access.js';
import { missingApiKey } from '../http/errors.js';

/** The authenticated key of a /v1 request (set by the v1 scope's auth hook). */
export function principalOf(request: FastifyRequest): AuthenticatedKey {
  if (!request.principal) throw missingApiKey();
  return request.principal;
}
