import type { GatewayConfig } from '../config/gateway-config.js';
import { estimatePromptTokens, tokenOperationOf, type ModelWork } from '../core/operations.js';
import { pricingFrom, reservedCostOf, type Pricing } from '../core/pricing.js';
import { ModelNames } from '../core/model-names.js';

/** What a model request is charged at admission, before it has used anything. */
export interface Charge {
  /** Prompt estimate + the most output the request may produce: what budgets reserve. */
  tokens: number;
  /** What the token rate reserves: `tokens` with the output capped by the model's reserve_output_tokens_max. */
  rateTokens: number;
  promptTokens: number;
  /** The output limit (per choice) to add to the request sent upstream: the client named none; null when it did. */
  addedOutputLimit: number | null;
  /** The most `tokens` may cost (0 without pricing): the prompt at the dearest input price, cache writes included. */
  cost: number;
  /** The model's price: what the reservation is costed at, and the real usage when no target priced it. */
  pricing: Pricing | null;
}

const OUTPUT_FIELDS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'] as const;
const CHOICE_FIELDS = ['n', 'best_of'] as const;

const positiveInteger = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;

/** The largest max field the client named (upstreams differ in which one they honour); undefined when none. */
export function namedOutputLimit(fields: Record<string, unknown>): number | undefined {
  let largest: number | undefined;
  for (const field of OUTPUT_FIELDS) {
    const value = fields[field];
    if (positiveInteger(value) && (largest === undefined || value > largest)) largest = value;
  }
  return largest;
}

interface ModelLimits {
  pricing: Pricing | null;
  /** The output a request that names no max field may produce (added to what is sent upstream). */
  maxOutput: number;
  reserveOutputMax?: number;
}

/**
 * The reservation of a model request (docs/limits-and-usage.md, "Charges that hold"): a bound of
 * what the upstream may charge for it. Input: the UTF-8 bytes of every field the upstream turns
 * into tokens, plus a stored history (estimatePromptTokens). Output: the largest max field times
 * `n` / `best_of`, or the model's `max_output_tokens` (default `rate_limits.default_max_output_tokens`),
 * which the model call then sends upstream (src/model-call/upstream-body.ts).
 */
export class RequestCharges {
  private readonly models = new Map<string, ModelLimits>();
  private readonly names: ModelNames;
  private readonly defaultMaxOutput: number;

  constructor(config: GatewayConfig) {
    this.names = new ModelNames(config.models);
    this.defaultMaxOutput = config.rate_limits.default_max_output_tokens;
    for (const model of config.models) {
      this.models.set(model.id, {
        pricing: pricingFrom(model.pricing),
        maxOutput: model.max_output_tokens ?? this.defaultMaxOutput,
        reserveOutputMax: model.reserve_output_tokens_max,
      });
    }
  }

  /**
   * `work`: what the route declares it creates (its route facts); images, audio and fine-tuning
   * reserve no tokens. `historyTokens`: the stored history the upstream reads with it.
   */
  of(work: ModelWork, body: unknown, historyTokens = 0): Charge {
    const fields = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
    const id = typeof fields.model === 'string' ? this.names.resolve(fields.model) : undefined;
    const model = id === undefined ? undefined : this.models.get(id);
    const pricing = model?.pricing ?? null;
    const operation = tokenOperationOf(work);
    if (!operation) return { tokens: 0, rateTokens: 0, promptTokens: 0, addedOutputLimit: null, cost: 0, pricing };
    const promptTokens = estimatePromptTokens(operation, fields, historyTokens);
    const named = namedOutputLimit(fields);
    const addedOutputLimit = operation.outputLimitField === null || named !== undefined ? null : (model?.maxOutput ?? this.defaultMaxOutput);
    const output = operation.outputLimitField === null ? 0 : (named ?? addedOutputLimit!) * choicesOf(fields);
    const rateOutput = model?.reserveOutputMax === undefined ? output : Math.min(output, model.reserveOutputMax);
    return {
      tokens: promptTokens + output,
      rateTokens: promptTokens + rateOutput,
      promptTokens,
      addedOutputLimit,
      cost: reservedCostOf(pricing, promptTokens, output),
      pricing,
    };
  }
}

/** How many outputs the request asks for: the larger of `n` and `best_of` (completions generate best_of and return n). */
function choicesOf(fields: Record<string, unknown>): number {
  let choices = 1;
  for (const field of CHOICE_FIELDS) {
    const value = fields[field];
    if (positiveInteger(value) && value > choices) choices = value;
  }
  return choices;
}
