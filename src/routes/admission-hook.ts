import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from './app-context.js';
import { concurrencyLimitExceeded, insufficientQuota, rateLimitExceeded, storeUnavailable, type ApiError } from '../http/errors.js';
import type { Admitted } from '../quota/admission.js';
import { budgetPeriodsAt } from '../quota/budget-periods.js';
import { QuotaReservation } from '../quota/quota-reservation.js';
import type { Charge } from '../quota/request-charge.js';
import { anthropicRateLimitHeaders, managementLimitHeaders, rateLimitHeaders } from '../quota/rate-limit-headers.js';
import { speaksAnthropic } from '../http/anthropic-errors.js';
import { requireModel } from '../auth/key-access.js';
import { limitKindOf } from '../store/quota-types.js';

/**
 * Runs right after authentication on every /v1 request: one admission decision (the model policy
 * for model routes, the management limit for the others), the rate-limit headers on the response
 * (kept on errors too), 429 when refused, and the admitted request counted in usage (buffered,
 * off the request path). An admitted model request that holds something (token or budget charge,
 * concurrency lease) is settled exactly once, when its response has been written or its client
 * dropped (the raw response's 'close'; src/http/slow-readers.ts drops clients that stop reading):
 * with the usage its route reported, else as src/quota/quota-reservation.ts says.
 */
export async function admitRequest(ctx: AppContext, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { projectId, keyId, access, limited } = request.principal!;
  const { window_seconds: window, burst_window_seconds: burstWindow } = ctx.config.rate_limits;
  let model: string | null = null;
  let clientGone = false;
  const facts = request.routeOptions.config.modelCall;
  if (facts?.traffic === 'model') {
    const named = namedModelOf(request.body);
    model = named === undefined ? null : (ctx.models.resolve(named)?.id ?? null);
    // The key's model allow-list, before anything is reserved or charged (src/auth/key-access.ts).
    if (named !== undefined) requireModel(access, named, model ?? undefined);
    const history = facts.historyTokens ? await facts.historyTokens(ctx, projectId, request.body) : 0;
    const charge = ctx.charges.of(facts.work, request.body, history);
    request.charge = charge;
    // A key with limits of its own is decided at both levels in the same call; one without costs nothing more.
    const decision = await ctx.admission.admit(projectId, charge, limited ? keyId : undefined);
    reply.headers(rateLimitHeaders(decision, window, burstWindow));
    // An admitted request's outcome, project and key are on its model-call span (src/model-call/model-call.ts).
    if (!decision.allowed) {
      request.traceSpan?.setAttributes({
        'nova.admission.outcome': 'refused',
        'nova.admission.refused_by': decision.refusedBy ?? 'requests',
        'nova.admission.level': decision.level ?? 'project',
        'nova.project.id': projectId,
        'nova.api_key.id': keyId,
      });
    }
    if (speaksAnthropic(request)) reply.headers(anthropicRateLimitHeaders(decision, ctx.now()));
    if (!decision.allowed) {
      // Counted in the usage buckets by the limit's kind, not in `requests` (admitted ones only).
      ctx.usage.record({ projectId, requestId: request.id, apiKeyId: keyId, model, part: 'refusal', refusedBy: limitKindOf(decision.refusedBy ?? 'requests') });
      throw refusal(decision, charge, ctx.now(), keyId);
    }
    request.projectPriority = decision.priority ?? null;
    const metrics = ctx.metrics.quota;
    metrics.requestInFlight(projectId, true);
    const held = decision.reservation ? new QuotaReservation(ctx.admission, projectId, decision.reservation, charge) : null;
    request.reservation = held;
    const closed = () => {
      metrics.requestInFlight(projectId, false);
      held?.responseClosed();
      // An error answer of any model route (a stream that failed after its 200 is ModelCall.finish's
      // to report): part "error", so a request that both report counts once.
      if (reply.raw.headersSent && reply.raw.statusCode >= 500) {
        ctx.usage.record({ projectId, requestId: request.id, apiKeyId: keyId, model, part: 'error', errors: 1 });
      }
    };
    // A client that left while the admission was decided: its response's 'close' has already passed,
    // so what the request holds is given back now, and no handler runs for it (below).
    clientGone = reply.raw.destroyed;
    if (clientGone) closed();
    else reply.raw.once('close', closed);
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
  ctx.usage.record({ projectId, requestId: request.id, apiKeyId: keyId, requests: 1, part: 'request', model });
  if (clientGone) reply.hijack();
}

/**
 * The model name a JSON body sends; its configured model (by id or alias) is the usage group, null for
 * a client's unknown name. A multipart body is read by its route, which checks the name itself.
 */
function namedModelOf(body: unknown): string | undefined {
  const named = body !== null && typeof body === 'object' ? (body as { model?: unknown }).model : undefined;
  return typeof named === 'string' ? named : undefined;
}

/**
 * The 429 of a refused model request: it names the limit that refused (code and message) and its
 * level, the key's own limits or the project's (also in x-ratelimit-scope, src/quota/rate-limit-headers.ts).
 */
function refusal(decision: Admitted, charge: Charge, nowMs: number, keyId: string): ApiError {
  const byKey = decision.level === 'key' && decision.key;
  const policy = byKey ? decision.key!.policy : decision.policy;
  const figures = byKey ? decision.key! : decision;
  const whose = byKey ? `this API key's (${keyId})` : "the project's";
  const subject = byKey ? `this API key (${keyId})` : 'this project';
  const retry = decision.retryAfterMs / 1000;
  switch (decision.refusedBy) {
    case 'tokens':
      return rateLimitExceeded(
        retry,
        charge.rateTokens > policy.tokens_per_minute!
          ? `Token rate limit: this request may use ${charge.rateTokens} tokens (prompt estimate + max output), more than ${whose} tokens_per_minute of ${policy.tokens_per_minute}; lower max_tokens.`
          : `Token rate limit exceeded for ${subject}: tokens_per_minute ${policy.tokens_per_minute}; this request may use ${charge.rateTokens} tokens (prompt estimate + max output) and ${figures.tokensRemaining} are left in the window.`,
      );
    case 'concurrency':
      return concurrencyLimitExceeded(
        retry,
        `Concurrency limit exceeded: ${subject} already has ${figures.inFlight} model requests in flight (max_concurrent_requests ${policy.max_concurrent_requests}).`,
      );
    case 'budget_unchecked':
      return storeUnavailable(
        `${byKey ? `This API key (${keyId})` : 'The project'} has a budget and the quota store is unreachable; budgets fail closed on this gateway. Retry shortly.`,
      );
    case 'daily_tokens':
    case 'monthly_tokens':
    case 'monthly_cost': {
      const periods = budgetPeriodsAt(nowMs);
      const endMs = decision.refusedBy === 'daily_tokens' ? periods.dayEndMs : periods.monthEndMs;
      return insufficientQuota(
        (endMs - nowMs) / 1000,
        `Budget spent: ${whose} ${decision.refusedBy} budget of ${policy[decision.refusedBy]} is used up until ${new Date(endMs).toISOString()} (UTC calendar period).`,
      );
    }
    default:
      return rateLimitExceeded(
        retry,
        `Rate limit exceeded for ${subject}: requests_per_minute ${policy.requests_per_minute} plus a burst allowance of ${policy.burst_limit ?? 0}.`,
      );
  }
}
