import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../app-context.js';
import { rateLimitExceeded } from '../http/errors.js';
import { managementLimitHeaders, rateLimitHeaders } from './rate-limit-headers.js';
import { routeKindOf } from './route-kind.js';

/**
 * Runs right after authentication on every /v1 request: one admission decision (the model policy
 * for model routes, the management limit for the others), the rate-limit headers on the response
 * (kept on errors too), 429 when refused, and the admitted request counted in usage (buffered,
 * off the request path).
 */
export async function admitRequest(ctx: AppContext, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const projectId = request.principal!.projectId;
  const { window_seconds: window, burst_window_seconds: burstWindow } = ctx.config.rate_limits;
  if (routeKindOf(request.method, request.routeOptions.url) === 'model') {
    const decision = await ctx.admission.admit(projectId);
    reply.headers(rateLimitHeaders(decision, window, burstWindow));
    if (!decision.allowed) throw rateLimitExceeded(decision.retryAfterMs / 1000);
  } else {
    const decision = await ctx.managementLimit.admit(projectId);
    reply.headers(managementLimitHeaders(decision, window));
    if (!decision.allowed) {
      ctx.metrics.quota.refused(projectId, 'management');
      throw rateLimitExceeded(
        decision.resetMs / 1000,
        `Management request rate limit exceeded for this project (${decision.limit} per ${window} s); model traffic is not affected.`,
      );
    }
  }
  ctx.usage.record({ projectId, requestId: request.id, requests: 1, part: 'request' });
}
