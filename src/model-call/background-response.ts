import type { FastifyBaseLogger } from 'fastify';
import { costOf, reservedCostOf } from '../core/pricing.js';
import type { TokenUsage } from '../core/operations.js';
import type { FollowedReservation, QuotaReservation } from '../quota/quota-reservation.js';
import type { Charge } from '../quota/request-charge.js';
import { CallSignal } from './call-signal.js';
import type { ModelCallContext } from './model-call-context.js';
import type { RegisteredModel, Target } from './model-registry.js';
import { recordResponseHistory, responseUsageOf } from './response-history.js';
import { readBounded, sendToTarget } from './upstream-call.js';

/**
 * Background Responses (`background: true`, docs/limits-and-usage.md "Background responses"): the
 * upstream answers `queued` before the model has produced anything, so the usage is known only
 * when the response ends. The gateway follows each one up itself: it keeps the request's
 * reservation (token and budget charges, concurrency lease) past the reply, polls the response on
 * the target that holds it until it ends, and then charges it once: its usage, or its reservation
 * when the usage is missing or invalid, the bound passed, the upstream lost it or the gateway
 * stopped. Reading it back later is not metered (responses.ts), so nothing counts twice.
 */

/** How a followed response was charged (the `outcome` of nova_background_responses_total). */
type Outcome = 'usage' | 'no_usage' | 'bound' | 'gone' | 'shutdown' | 'client_closed';

const PENDING = new Set(['queued', 'in_progress']);

/** The request whose background response is followed. */
export interface BackgroundCall {
  projectId: string;
  requestId: string;
  model: RegisteredModel;
  target: Target;
  targetIndex: number;
  /** What the request holds; null when its project has no limit that holds anything. */
  reservation: QuotaReservation | null;
  /** What it was charged at admission: what it is charged when its usage cannot be known. */
  charge: Charge;
  /** The request's logger (its lines keep the request id after the response ended). */
  log: FastifyBaseLogger;
}

interface Following {
  call: BackgroundCall;
  responseId: string | null;
  owned: FollowedReservation | null;
  /** Stops the pause and the poll in progress: at the bound or at shutdown. */
  signal: CallSignal;
  stoppedBy: Outcome | null;
  /** Settles when the following has charged the request. */
  done?: Promise<void>;
}

/** The id, status and usage of a Responses API object; nulls for what is missing or malformed. */
function responseStateOf(bytes: Buffer): { id: string | null; status: string | null; usage: TokenUsage | null } {
  let object: unknown;
  try {
    object = JSON.parse(bytes.toString('utf8'));
  } catch {
    return { id: null, status: null, usage: null };
  }
  const { id, status, usage } = (object !== null && typeof object === 'object' ? object : {}) as Record<string, unknown>;
  return { id: typeof id === 'string' ? id : null, status: typeof status === 'string' ? status : null, usage: responseUsageOf(usage) };
}

export class BackgroundResponses {
  private readonly following = new Set<Following>();
  private closed = false;

  constructor(
    private readonly ctx: ModelCallContext,
    private readonly pollMs: number,
    private readonly maxMs: number,
  ) {}

  /**
   * The upstream's 2xx reply to a background request, before it is relayed: the charge is taken
   * over (the model call that relays it meters nothing, responses.ts) and followed while the
   * response is pending; a reply that already ended is charged at once.
   */
  take(call: BackgroundCall, reply: Buffer): void {
    const state = responseStateOf(reply);
    const following: Following = { call, responseId: state.id, owned: call.reservation?.follow() ?? null, signal: new CallSignal(), stoppedBy: null };
    const pending = state.status !== null && PENDING.has(state.status);
    if (!pending || state.id === null || call.target.kind !== 'http' || this.closed) {
      this.end(following, state.usage ? 'usage' : 'no_usage', state.usage);
      return;
    }
    this.following.add(following);
    const bound = setTimeout(() => this.stop(following, 'bound'), this.maxMs).unref();
    following.done = this.follow(following)
      .catch((error: unknown) => call.log.error({ err: error }, 'background response follow-up failed'))
      .finally(() => clearTimeout(bound));
  }

  /** The client left before the reply was taken: the upstream may have queued the response all the same. */
  abandoned(call: BackgroundCall): void {
    this.end({ call, responseId: null, owned: call.reservation?.follow() ?? null, signal: new CallSignal(), stoppedBy: null }, 'client_closed', null);
  }

  /**
   * At shutdown (app onClose, before the usage meter's last flush): each response still followed
   * is charged its reservation; a replica that dies instead leaves the charge as reserved and its
   * lease to expire.
   */
  async close(): Promise<void> {
    this.closed = true;
    const ending = [...this.following].map((following) => {
      this.stop(following, 'shutdown');
      return following.done;
    });
    await Promise.all(ending);
  }

  private stop(following: Following, outcome: Outcome): void {
    following.stoppedBy ??= outcome;
    following.signal.abort();
  }

  /** Polls until the response ends, the upstream no longer has it, or it is stopped. */
  private async follow(following: Following): Promise<void> {
    for (;;) {
      await this.pause(following.signal);
      if (following.stoppedBy) return this.end(following, following.stoppedBy, null);
      const polled = await this.poll(following).catch(() => null);
      if (following.stoppedBy) return this.end(following, following.stoppedBy, null);
      if (polled === 'gone') return this.end(following, 'gone', null);
      // A failed poll (network, 5xx, a reply that does not parse) is tried again at the next beat.
      if (polled?.status && !PENDING.has(polled.status)) return this.end(following, polled.usage ? 'usage' : 'no_usage', polled.usage);
    }
  }

  private pause(signal: CallSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.off('abort', done);
        resolve();
      };
      const timer = setTimeout(done, this.pollMs);
      signal.once('abort', done);
    });
  }

  /** GET /responses/{id} on the target that holds it, as the stored routes do (responses.ts). */
  private async poll({ call, responseId, signal }: Following): Promise<ReturnType<typeof responseStateOf> | 'gone' | null> {
    if (call.target.kind !== 'http') return null;
    const response = await sendToTarget(
      call.target,
      { method: 'GET', path: `/responses/${encodeURIComponent(responseId!)}`, accept: 'application/json' },
      { requestId: call.requestId, stream: false, signal, wholeLimit: this.ctx.config.upstream.max_json_reply_bytes },
    );
    const bytes = await (response.whole ?? readBounded(response.body, this.ctx.config.upstream.max_json_reply_bytes));
    if (response.status === 404 || response.status === 410) return 'gone';
    return response.status >= 200 && response.status < 300 ? responseStateOf(bytes) : null;
  }

  /** Charges the request once: the reservation's settlement and the usage record (the shape ModelCall.finish writes). */
  private end(following: Following, outcome: Outcome, usage: TokenUsage | null): void {
    this.following.delete(following);
    const { call, owned, responseId } = following;
    const { ctx } = this;
    const prompt = usage ? usage.prompt_tokens : call.charge.promptTokens;
    const completion = usage ? usage.completion_tokens : call.charge.tokens - call.charge.promptTokens;
    // As ModelCall.finish costs them: usage at the serving target's prices, a reservation as admission costed it.
    const cost = usage ? costOf(call.target.pricing, usage) : reservedCostOf(call.charge.pricing ?? call.target.pricing, prompt, completion);
    owned?.settle(prompt, completion, cost);
    // Its own part: the model call that relayed the queued reply already wrote the request's
    // "usage" report (with no tokens), and the usage meter keeps one report per part.
    ctx.usage.record({
      projectId: call.projectId,
      requestId: call.requestId,
      model: call.model.id,
      promptTokens: prompt,
      completionTokens: completion,
      cachedPromptTokens: usage?.cached_prompt_tokens,
      cacheWriteTokens: usage?.cache_write_tokens,
      reasoningTokens: usage?.reasoning_tokens,
      cost,
      storageBytesDelta: 0,
      part: 'background',
    });
    const traffic = ctx.metrics.modelTraffic;
    traffic.backgroundResponses.inc({ gen_ai_request_model: call.model.id, outcome });
    traffic.tokenUsage.observe({ gen_ai_request_model: call.model.id, gen_ai_token_type: 'input' }, prompt);
    traffic.tokenUsage.observe({ gen_ai_request_model: call.model.id, gen_ai_token_type: 'output' }, completion);
    call.log.info({ response_id: responseId, prompt_tokens: prompt, completion_tokens: completion, outcome }, 'background response charged');
    if (usage && responseId !== null) {
      recordResponseHistory(ctx.store, call.projectId, responseId, { model: call.model.id, targetIndex: call.targetIndex }, prompt + completion).catch(
        (error: unknown) => call.log.warn({ err: error }, 'response history not stored: store unavailable'),
      );
    }
  }
}
