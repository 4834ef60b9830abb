import type { TokenUsage } from './operations.js';

/** Prices of a target, in dollars per million tokens. */
export interface Pricing {
  inputPerMillion: number;
  outputPerMillion: number;
  /** Prompt tokens read from the upstream's prompt cache; default: inputPerMillion. */
  cachedInputPerMillion?: number;
  /** Prompt tokens written to the upstream's prompt cache; default: inputPerMillion. */
  cacheWritePerMillion?: number;
}

/**
 * What a request cost at the target that served it; 0 when the target has no pricing. The cached
 * and cache-write tokens are parts of prompt_tokens (src/core/operations.ts TokenUsage), each at
 * its own price, the rest at the input price; reasoning tokens are output, inside completion_tokens.
 */
export function costOf(pricing: Pricing | null | undefined, usage: TokenUsage): number {
  if (!pricing) return 0;
  const cached = usage.cached_prompt_tokens ?? 0;
  const written = usage.cache_write_tokens ?? 0;
  // Parts larger than their whole (not from tokensOf / anthropicTokensOf) price no input twice.
  const plain = Math.max(0, usage.prompt_tokens - cached - written);
  return (
    (plain * pricing.inputPerMillion +
      cached * (pricing.cachedInputPerMillion ?? pricing.inputPerMillion) +
      written * (pricing.cacheWritePerMillion ?? pricing.inputPerMillion) +
      usage.completion_tokens * pricing.outputPerMillion) /
    1_000_000
  );
}

/**
 * The most `promptTokens` and `outputTokens` may cost, whatever part of the prompt the upstream
 * reads from or writes to its cache: every prompt token at the dearest input price. What a
 * reservation is costed at, so that a cache write dearer than input cannot take a cost budget past it.
 */
export function reservedCostOf(pricing: Pricing | null | undefined, promptTokens: number, outputTokens: number): number {
  if (!pricing) return 0;
  const input = Math.max(pricing.inputPerMillion, pricing.cachedInputPerMillion ?? 0, pricing.cacheWritePerMillion ?? 0);
  return (promptTokens * input + outputTokens * pricing.outputPerMillion) / 1_000_000;
}

/** The prices of a `pricing` config entry; null when the entry has none. */
export function pricingFrom(
  config: { input_per_million: number; output_per_million: number; cached_input_per_million?: number; cache_write_per_million?: number } | undefined,
): Pricing | null {
  if (!config) return null;
  const pricing: Pricing = { inputPerMillion: config.input_per_million, outputPerMillion: config.output_per_million };
  if (config.cached_input_per_million !== undefined) pricing.cachedInputPerMillion = config.cached_input_per_million;
  if (config.cache_write_per_million !== undefined) pricing.cacheWritePerMillion = config.cache_write_per_million;
  return pricing;
}
