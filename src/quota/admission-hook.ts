import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../app-context.js';
import { rateLimitExceeded } from '../http/errors.js';
import { rateLimitHeaders } from './rate-limit-headers.js';

/**
 * Runs right after authentication on every /v1 request: one admission decision, the
 * rate-limit headers on the response (kept on errors too), 429 when refused, and the
 * admitted request counted in usage (buffered, off the request path).
 */
export async function admitRequest(ctx: AppContext, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { projectId, keyId } = request.principal!;
  const decision = await ctx.admission.admit(projectId);
  const { window_seconds: window, burst_window_seconds: burstWindow } = ctx.config.rate_limits;
  reply.headers(rateLimitHeaders(decision, window, burstWindow));
  if (!decision.allowed) throw rateLimitExceeded(decision.retryAfterMs / 1000);
  ctx.usage.record({ projectId, requestId: request.id, apiKeyId: keyId, requests: 1, part: 'request' });
}
