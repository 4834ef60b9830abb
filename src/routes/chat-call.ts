import type { FastifyReply, FastifyRequest } from 'fastify';
import { addLogFields } from '../http/access-log.js';
import type { AppContext } from '../app-context.js';
import { costOf } from '../quota/cost.js';
import type { ChatBody } from '../upstream/chat-body.js';
import type { RegisteredModel, Target } from '../upstream/model-registry.js';
import type { Attempt, FallbackEvents } from '../upstream/upstream-call.js';
import type { ConversationPlan } from './chat-conversation.js';

export interface ChatOutcome {
  outcome: string;
  promptTokens: number;
  completionTokens: number;
  storageBytes: number;
  attempt: Attempt | null;
}

/** One chat completion in progress: what both the JSON and the streaming path need. */
export class ChatCall {
  readonly controller = new AbortController();
  private finished = false;

  constructor(
    readonly ctx: AppContext,
    readonly request: FastifyRequest,
    readonly reply: FastifyReply,
    readonly projectId: string,
    readonly model: RegisteredModel,
    readonly body: ChatBody,
    readonly plan: ConversationPlan,
  ) {}

  get stream(): boolean {
    return this.body.stream === true;
  }

  upstreamModelOf(target: Target): string {
    return target.kind === 'http' ? target.upstreamModel : this.model.id;
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
  }

  /** Meters, observes and logs the finished request: exactly once, whichever way it ended. */
  finish(result: ChatOutcome): void {
    if (this.finished) return;
    this.finished = true;
    const { ctx, model } = this;
    ctx.usage.record({
      projectId: this.projectId,
      requestId: this.request.id,
      model: model.id,
      promptTokens: result.promptTokens,
      completionTokens: result.completionTokens,
      cost: costOf(result.attempt?.target.pricing, result.promptTokens, result.completionTokens),
      storageBytesDelta: result.storageBytes,
    });
    const traffic = ctx.metrics.modelTraffic;
    if (result.promptTokens > 0 || result.completionTokens > 0) {
      traffic.tokenUsage.observe({ gen_ai_request_model: model.id, gen_ai_token_type: 'input' }, result.promptTokens);
      traffic.tokenUsage.observe({ gen_ai_request_model: model.id, gen_ai_token_type: 'output' }, result.completionTokens);
    }
    traffic.operationDuration.observe(
      {
        gen_ai_request_model: model.id,
        gen_ai_operation_name: 'chat',
        stream: String(this.stream),
        error_type: result.outcome === 'completed' ? '' : result.outcome,
      },
      this.reply.elapsedTime / 1000,
    );
    addLogFields(
      this.request,
      {
        model: model.id,
        stream: this.stream,
        upstream: result.attempt?.target.label ?? null,
        target_index: result.attempt?.index ?? null,
        conversation_id: this.plan.id,
        prompt_tokens: result.promptTokens,
        completion_tokens: result.completionTokens,
        outcome: result.outcome,
      },
      'chat completion finished',
    );
  }
}
