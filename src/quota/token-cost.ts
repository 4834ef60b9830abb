import type { PricingConfig } from '../config/schema.js';

/** Cost of tokens at a model's price (currency units per 1M tokens); 0 for an unpriced model. */
export function costOfTokens(pricing: PricingConfig | undefined, promptTokens: number, completionTokens: number): number {
  if (!pricing) return 0;
  return (promptTokens * pricing.input_per_million + completionTokens * pricing.output_per_million) / 1_000_000;
}
