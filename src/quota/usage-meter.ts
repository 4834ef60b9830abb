import type { ModelLimitKind } from '../store/quota-types.js';
import type { BudgetCorrection } from '../store/usage-types.js';

/**
 * What a request consumed, reported by the route that served it. The meter counts each
 * measure once per request id and never blocks or fails the request that reports it.
 */
export interface UsageRecord {
  projectId: string;
  requestId: string;
  model?: string | null;
  /** Admitted requests; set by admission (1), not by routes. */
  requests?: number;
  /** All input processed, the cached and cache-write tokens included. */
  promptTokens?: number;
  completionTokens?: number;
  /** Of promptTokens, read from the upstream's prompt cache. */
  cachedPromptTokens?: number;
  /** Of promptTokens, written to the upstream's prompt cache. */
  cacheWriteTokens?: number;
  /** Of completionTokens, spent on reasoning. */
  reasoningTokens?: number;
  imageGenerations?: number;
  audioSeconds?: number;
  /** Change in what the project stores (conversations, transcripts, metadata), in bytes. */
  storageBytesDelta?: number;
  /**
   * Tells apart several reports of one request: one report per (request, part) counts.
   * Default "usage" (the route's report); "request" is admission's own (set with requests: 1),
   * "refusal" its report of a refused request, "error" the report of an error answer.
   */
  part?: string;
  /**
   * A model request a limit refused: which kind (admission's report, part "refusal", once per
   * request by construction). It counts in the refusals, never in `requests`.
   */
  refusedBy?: ModelLimitKind;
  /**
   * An admitted model request that ended in an error answer (1). Reported with part "error" by
   * whichever sees it first (src/model-call/model-call.ts finish, src/routes/admission-hook.ts), so it counts once.
   */
  errors?: number;
  /** The API key that made the request (admission sets it; later reports of the request inherit it). */
  apiKeyId?: string;
  /** Dollars, computed once at settlement from the pricing of the target that served the request (src/quota/cost.ts). */
  cost?: number;
  /** When it happened (epoch ms); default: when recorded. */
  atMs?: number;
  /** What the budget counters miss of the request (src/quota/admission.ts settle): written with the usage, once. */
  budget?: BudgetCorrection;
}

export interface UsageMeter {
  record(usage: UsageRecord): void;
}

/** Counts nothing: for tests that do not look at usage. */
export const noUsageMeter: UsageMeter = { record() {} };
