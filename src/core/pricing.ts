/** Prices of a target, in dollars per million tokens. */
export interface Pricing {
  inputPerMillion: number;
  outputPerMillion: number;
}

/** What a request cost at the target that served it; 0 when the target has no pricing. */
export function costOf(pricing: Pricing | null | undefined, promptTokens: number, completionTokens: number): number {
  if (!pricing) return 0;
  return (promptTokens * pricing.inputPerMillion + completionTokens * pricing.outputPerMillion) / 1_000_000;
}

/** The prices of a `pricing` config entry; null when the entry has none. */
export function pricingFrom(config: { input_per_million: number; output_per_million: number } | undefined): Pricing | null {
  return config ? { inputPerMillion: config.input_per_million, outputPerMillion: config.output_per_million } : null;
}
