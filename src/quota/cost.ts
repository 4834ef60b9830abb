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
