import { UPSTREAM_ID_PATTERN } from '../core/ids.js';
import { tokensOf, type TokenUsage } from '../core/operations.js';
import { USAGE_CAPS } from '../quota/usage-validation.js';
import type { ResponseOwner } from '../store/response-types.js';
import { StoreUnavailableError, type Store } from '../store/types.js';

const VALID_ID = new RegExp(UPSTREAM_ID_PATTERN);
const MAX_HISTORY = USAGE_CAPS.promptTokens + USAGE_CAPS.completionTokens;

/**
 * The history a Responses request makes the upstream read again: with `previous_response_id`, the
 * previous response's input + output tokens, as its owner record holds them (0 when there is none
 * or it is not known yet). For the admission's reservation (docs/limits-and-usage.md). A store
 * that does not answer counts 0: the route then answers 503 on its own read of the owner.
 */
export async function responseHistoryTokens(ctx: { store: Store }, projectId: string, body: unknown): Promise<number> {
  const previous = body !== null && typeof body === 'object' ? (body as { previous_response_id?: unknown }).previous_response_id : undefined;
  if (typeof previous !== 'string' || !VALID_ID.test(previous)) return 0;
  try {
    const tokens = (await ctx.store.responses.get(projectId, previous))?.historyTokens;
    return tokens !== undefined && Number.isSafeInteger(tokens) && tokens >= 0 && tokens <= MAX_HISTORY ? tokens : 0;
  } catch (error) {
    if (error instanceof StoreUnavailableError) return 0;
    throw error;
  }
}

/** A Responses API usage object's counts (its cached and reasoning parts too), or null when one is missing or not a whole number a usage record takes (tokensOf). */
export function responseUsageOf(usage: unknown): TokenUsage | null {
  const tokens = tokensOf(usage);
  if (typeof tokens !== 'object' || tokens.prompt_tokens > USAGE_CAPS.promptTokens || tokens.completion_tokens > USAGE_CAPS.completionTokens) return null;
  return tokens;
}

/** Adds a finished response's tokens to its owner record (nothing when it was not stored or is gone). */
export function recordResponseHistory(store: Store, projectId: string, responseId: string, owner: ResponseOwner, historyTokens: number): Promise<void> {
  if (!VALID_ID.test(responseId)) return Promise.resolve();
  return store.responses.recordHistory(projectId, responseId, { ...owner, historyTokens });
}
