import type { FastifyReply, FastifyRequest } from 'fastify';
import { addLogFields } from '../http/access-log.js';
import { ApiError } from '../http/errors.js';
import type { ModelCallContext } from './model-call-context.js';
import { costOf, reservedCostOf } from '../core/pricing.js';
import { USAGE_CAPS, withinCap } from '../quota/usage-validation.js';
import type { RegisteredModel, Target } from './model-registry.js';
import type { Operation, ReportedUsage, TokenUsage } from '../core/operations.js';
import { callTarget, requestWithFallback, type Attempt, type FallbackEvents } from './upstream-call.js';
import type { UpstreamResponse } from './upstream-response.js';
import { CallSignal } from './call-signal.js';
import { ClientGone } from './upstream-errors.js';
import { modelCallFactsOf } from './route-facts.js';
import { ByteToken } from '../core/json-bytes.js';
import { ticketOf, type TargetLease } from './target-fleet.js';
import { SpanStatusCode } from '../tracing/span-status.js';
import type { Span, Tracing } from '../tracing/tracing.js';

/**
 * What a finished call is charged for: the usage the upstream reported; 'missing' / 'invalid'
 * usage or a client that left once the upstream had the request ('client_closed'), charged the
 * reservation (docs/limits-and-usage.md, "Charges that hold"); or 'nothing' (the upstream did no
 * work: it was never reached, or refused the request).
 */
export type Metered = ReportedUsage | 'client_closed' | 'nothing';

const AS_RESERVED = { missing: 'usage_missing', invalid: 'usage_invalid', client_closed: 'client_closed' } as const;
const NOTHING: TokenUsage = { prompt_tokens: 0, completion_tokens: 0 };
/** vLLM's priority scheduling serves lower values first; 0 is its default. */
const VLLM_PRIORITY = { high: -1, normal: 0, low: 1 } as const;

export interface CallOutcome {
  outcome: string;
  usage: Metered;
  storageBytes: number;
  attempt: Attempt | null;
  /**
   * The call ended in an error answer: a 5xx (the upstream's failure, unreachable or timed out, or
   * the gateway's own), or a stream the upstream broke off or ended before its last event. Counted
   * in the usage buckets' `errors` (docs/limits-and-usage.md, "Usage").
   */
  failed?: boolean;
  /** Extra access-log fields (a conversation id, …). */
  log?: Record<string, unknown>;
  /** The choices' finish reasons, where the reply was read whole (the span's gen_ai.response.finish_reasons). */
  finishReasons?: string[];
}

export function outcomeOf(error: unknown): string {
  if (error instanceof ClientGone) return 'client_closed';
  if (error instanceof ApiError) return error.code;
  return 'internal_error';
}

/** One model request in progress (chat, completions, embeddings, responses): what every route and path needs. */
export class ModelCall {
  /** Fired when the client leaves: cancels the upstream request whichever stage it is in. */
  readonly signal = new CallSignal();
  private finished = false;
  /** The request went to an upstream: from then on it may have done work, whatever happens. */
  private sent = false;
  /** An upstream answered with a reply (its headers): a reply that breaks off after this was worked on. */
  private replied = false;
  /** The hold on the target that answered, released when the call finishes. */
  private lease: TargetLease<Target> | undefined;
  /** The model id answers name, as a JSON string literal: the name the client sent (an alias, or the id). */
  readonly answerModel: ByteToken;
  /** The call's span (GenAI semantic conventions) when tracing is on: ended by finish. */
  private readonly span: Span | null;

  constructor(
    readonly ctx: ModelCallContext,
    readonly request: FastifyRequest,
    readonly reply: FastifyReply,
    readonly projectId: string,
    readonly model: RegisteredModel,
    readonly operation: Operation,
    readonly stream: boolean,
    /** false: a stored object is read (its usage was counted when it was created). */
    private readonly options: { metersTokens: boolean } = { metersTokens: true },
  ) {
    modelCallFactsOf(request);
    request.reservation?.claim();
    const sent = (request.body as { model?: unknown } | undefined)?.model;
    this.answerModel = typeof sent === 'string' && sent !== model.id ? ByteToken.quoted(sent) : model.idJson;
    // A request its sampler left out gets no spans of its own; its attempts still pass the trace on.
    this.span = ctx.tracing && request.traceSpan?.isRecording() ? this.startSpan(ctx.tracing, request.traceSpan, typeof sent === 'string' ? sent : model.id) : null;
  }

  private startSpan(tracing: Tracing, parent: Span, requestModel: string): Span {
    const principal = this.request.principal;
    return tracing.startChildSpan(parent, `${this.operation.metricName} ${requestModel}`, 'internal', {
      'gen_ai.operation.name': this.operation.metricName,
      'gen_ai.request.model': requestModel,
      // The configured id, when the client named an alias.
      'nova.model': requestModel === this.model.id ? undefined : this.model.id,
      'nova.stream': this.stream,
      'nova.project.id': principal?.projectId,
      'nova.api_key.id': principal?.keyId,
      'nova.admission.outcome': 'admitted',
    });
  }

  /**
   * A client span per upstream attempt, its `traceparent` in the attempt's headers, so the backend's
   * own spans join the trace; for a request left out of sampling, the server span's (not sampled),
   * so the backend leaves it out too.
   */
  private traced(attempt: Attempt, headers: Record<string, string> | undefined): Record<string, string> | undefined {
    const target = attempt.target;
    const serverSpan = this.request.traceSpan;
    if (!this.ctx.tracing || !serverSpan || target.kind !== 'http') return headers;
    if (this.span) {
      const colon = target.label.lastIndexOf(':');
      attempt.span = this.ctx.tracing.startChildSpan(this.span, 'POST', 'client', {
        'http.request.method': 'POST',
        'server.address': target.label.slice(0, colon),
        'server.port': Number(target.label.slice(colon + 1)),
        'gen_ai.request.model': target.upstreamModel,
        'nova.target_index': attempt.index,
      });
    }
    const traced = { ...headers };
    this.ctx.tracing.inject(attempt.span ?? serverSpan, traced);
    return traced;
  }

  upstreamModelOf(target: Target): string {
    return target.kind === 'http' ? target.upstreamModel : this.model.id;
  }

  /**
   * Sends the body built for each target to the model's targets in order (fallbacks before the
   * first byte). `upstream`: another path than the operation's (a translated call), headers of the client's to pass on.
   */
  async send(
    bodyFor: (upstreamModel: string) => Record<string, unknown>,
    targets = this.model.targets,
    upstream: { path?: string; headers?: Record<string, string> } = {},
  ): Promise<{ response: UpstreamResponse; attempt: Attempt }> {
    const options = {
      requestId: this.request.id,
      stream: this.stream,
      signal: this.signal,
      wholeLimit: this.ctx.config.upstream.max_json_reply_bytes,
      headers: upstream.headers,
    };
    const path = upstream.path ?? this.operation.path;
    const queuedSince = performance.now();
    // A pinned list (a stored response's target) goes as given, past the fleet. Sent once a target
    // has it: a request that left while waiting in the model's queue did no work anywhere.
    const sent = await requestWithFallback(
      targets === this.model.targets ? this.model : { targets, fleet: null },
      (target, attempt) => {
        if (!this.sent) this.span?.setAttribute('nova.queue.wait_ms', Math.round((performance.now() - queuedSince) * 1000) / 1000);
        this.sent = true;
        const body = this.bounded(this.withPriority(bodyFor(this.upstreamModelOf(target))));
        return callTarget(target, path, this.model.id, body, this.request.traceSpan ? { ...options, headers: this.traced(attempt, options.headers) } : options);
      },
      options,
      this.fallbackEvents,
      ticketOf(this.request),
    );
    this.lease?.release(false);
    this.lease = sent.attempt.lease;
    this.replied = true;
    return sent;
  }

  /**
   * Runs the route's work: a client that disconnects cancels the upstream request whichever stage
   * it is in, and a failure is metered (as nothing consumed) before it is answered.
   */
  async run(work: () => Promise<unknown>): Promise<never> {
    this.reply.raw.once('close', () => {
      if (!this.reply.raw.writableEnded) this.signal.abort(new ClientGone());
    });
    try {
      // A JSON path returns its answer; a streaming path has sent the stream (typed loosely).
      return (await work()) as never;
    } catch (error) {
      // A client that left got no answer; a 4xx is the request's own fault (or the upstream's 429).
      const failed = !this.signal.aborted && !(error instanceof ClientGone) && !(error instanceof ApiError && error.statusCode < 500);
      this.finish({ outcome: outcomeOf(error), usage: this.usageOfFailure(error), storageBytes: 0, attempt: null, failed });
      if (this.signal.aborted) {
        // Nobody is left to answer.
        this.reply.hijack();
        this.reply.raw.destroy();
        return this.reply as never;
      }
      throw error;
    }
  }

  /** With `priority_param`, the request's priority as vLLM's `priority` field (lower is sooner). */
  private withPriority(body: Record<string, unknown>): Record<string, unknown> {
    if (this.model.priorityParam) body.priority = VLLM_PRIORITY[ticketOf(this.request).priority];
    return body;
  }

  /** The body with the output limit the reservation assumed when the client named none: what the upstream may produce is bounded. */
  private bounded(body: Record<string, unknown>): Record<string, unknown> {
    const limit = this.request.charge?.addedOutputLimit;
    const field = this.operation.outputLimitField;
    if (limit !== null && limit !== undefined && field !== null) body[field] = limit;
    return body;
  }

  /** What a call that failed is charged for: nothing, unless the upstream may have worked on it. */
  private usageOfFailure(error: unknown): Metered {
    if (!this.sent) return 'nothing';
    if (this.signal.aborted) return 'client_closed';
    if (this.replied || (error instanceof ApiError && error.code === 'upstream_timeout')) return 'missing';
    return 'nothing';
  }

  get fallbackEvents(): FallbackEvents {
    const traffic = this.ctx.metrics.modelTraffic;
    return {
      onFallback: (failed, error) => {
        traffic.fallbacks.inc({ gen_ai_request_model: this.model.id, from_upstream: failed.target.label });
        this.request.log.warn(
          { model: this.model.id, upstream: failed.target.label, target_index: failed.index, error_code: error.code },
          'upstream target failed; trying the next one',
        );
      },
      onAttemptEnd: (attempt, outcome) => this.observeUpstream(attempt, outcome),
    };
  }

  observeUpstream(attempt: Attempt, outcome: string): void {
    this.ctx.metrics.modelTraffic.upstreamDuration.observe(
      { gen_ai_request_model: this.model.id, upstream: attempt.target.label, outcome },
      (performance.now() - attempt.startedAt) / 1000,
    );
    if (attempt.span) endAttemptSpan(attempt.span, outcome);
  }

  /**
   * What a call is charged: the reported usage (with its cached, cache-write and reasoning parts),
   * else its whole reservation (counted by why; it has no parts), or nothing. A reservation is a
   * bound of what the upstream may charge (src/quota/request-charge.ts).
   */
  private chargedTokens(usage: Metered): TokenUsage {
    if (!this.options.metersTokens || usage === 'nothing') return NOTHING;
    if (typeof usage === 'object') return usage;
    this.ctx.metrics.modelTraffic.chargedAsReserved.inc({ gen_ai_request_model: this.model.id, reason: AS_RESERVED[usage] });
    const charge = this.request.charge;
    if (!charge) return NOTHING;
    return { prompt_tokens: charge.promptTokens, completion_tokens: charge.tokens - charge.promptTokens };
  }

  /** Meters, observes and logs the finished request: exactly once, whichever way it ended. Returns the tokens charged. */
  finish(outcome: CallOutcome): TokenUsage {
    if (this.finished) return NOTHING;
    this.finished = true;
    // The target's slot frees for the next request (a reply that started is not a health failure).
    this.lease?.release(false);
    const charged = this.chargedTokens(outcome.usage);
    const result = { ...outcome, promptTokens: charged.prompt_tokens, completionTokens: charged.completion_tokens };
    // Reported usage is costed at the prices of the target that served it, its cached and cache-write
    // tokens at theirs; a reservation as admission costed it (src/quota/request-charge.ts), at the model's.
    const reported = typeof outcome.usage === 'object';
    const pricing = reported ? result.attempt?.target.pricing : (this.request.charge?.pricing ?? result.attempt?.target.pricing);
    const cost = reported ? costOf(pricing, charged) : reservedCostOf(pricing, result.promptTokens, result.completionTokens);
    this.request.reservation?.settle(result.promptTokens, result.completionTokens, cost);
    const { ctx, model } = this;
    ctx.usage.record({
      projectId: this.projectId,
      requestId: this.request.id,
      model: model.id,
      promptTokens: result.promptTokens,
      completionTokens: result.completionTokens,
      cachedPromptTokens: charged.cached_prompt_tokens,
      cacheWriteTokens: charged.cache_write_tokens,
      reasoningTokens: charged.reasoning_tokens,
      cost,
      storageBytesDelta: result.storageBytes,
    });
    // Its own part: the admission hook reports a 5xx answer too, and the meter keeps one report per part.
    if (outcome.failed) ctx.usage.record({ projectId: this.projectId, requestId: this.request.id, model: model.id, part: 'error', errors: 1 });
    const traffic = ctx.metrics.modelTraffic;
    // The upstream's numbers as the usage record takes them (a value out of range as 0, and counted there).
    const input = withinCap(result.promptTokens, USAGE_CAPS.promptTokens, true);
    const output = withinCap(result.completionTokens, USAGE_CAPS.completionTokens, true);
    if (input > 0 || output > 0) {
      traffic.tokenUsage.observe({ gen_ai_request_model: model.id, gen_ai_token_type: 'input' }, input);
      traffic.tokenUsage.observe({ gen_ai_request_model: model.id, gen_ai_token_type: 'output' }, output);
    }
    traffic.operationDuration.observe(
      {
        gen_ai_request_model: model.id,
        gen_ai_operation_name: this.operation.metricName,
        stream: String(this.stream),
        error_type: result.outcome === 'completed' ? '' : result.outcome,
      },
      this.reply.elapsedTime / 1000,
    );
    if (this.span) this.endSpan(result, charged, reported);
    addLogFields(
      this.request,
      {
        model: model.id,
        operation: this.operation.name,
        stream: this.stream,
        upstream: result.attempt?.target.label ?? null,
        target_index: result.attempt?.index ?? null,
        prompt_tokens: result.promptTokens,
        completion_tokens: result.completionTokens,
        outcome: result.outcome,
        ...result.log,
      },
      `${this.operation.name} finished`,
    );
    return charged;
  }

  /** The GenAI attributes the finished call knows; the answering attempt's span ends too, if its reply was cut short. */
  private endSpan(result: CallOutcome, charged: TokenUsage, reported: boolean): void {
    const span = this.span!;
    const target = result.attempt?.target;
    span.setAttributes({
      'gen_ai.usage.input_tokens': charged.prompt_tokens,
      'gen_ai.usage.output_tokens': charged.completion_tokens,
      'gen_ai.response.model': target && this.upstreamModelOf(target),
      'gen_ai.response.finish_reasons': result.finishReasons,
      // The attempt span names the target; false here: charged as reserved (no usable usage).
      'nova.usage.reported': reported,
      'error.type': result.outcome === 'completed' ? undefined : result.outcome,
    });
    if (result.failed) span.setStatus({ code: SpanStatusCode.ERROR });
    if (result.attempt?.span?.isRecording()) endAttemptSpan(result.attempt.span, result.outcome);
    span.end();
  }
}

function endAttemptSpan(span: Span, outcome: string): void {
  const status = /^\d{3}$/.test(outcome) ? Number(outcome) : null;
  span.setAttributes(status === null ? { 'error.type': outcome } : { 'http.response.status_code': status });
  if (status === null || status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}
