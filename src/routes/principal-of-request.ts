import type { FastifyRequest } from 'fastify';
import type { KeyPrincipal } from '../store/types.js';
import { missingApiKey } from '../http/errors.js';

/** The authenticated key of a /v1 request (set by the v1 scope's auth hook). */
export function principalOf(request: FastifyRequest): KeyPrincipal {
  if (!request.principal) throw missingApiKey();
  return request.principal;
}
