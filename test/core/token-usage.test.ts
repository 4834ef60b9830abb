import { describe, expect, it } from 'vitest';
import { anthropicTokensOf, tokensOf } from '../../src/core/operations.js';
import { costOf, pricingFrom, reservedCostOf } from '../../src/core/pricing.js';

/** Issue 31 item 6: cached, cache-write and reasoning tokens, read from every upstream's usage and costed at their prices. */
describe('tokensOf: the details of an OpenAI usage object', () => {
  it('reads chat completions details', () => {
    const usage = {
      prompt_tokens: 2006,
      completion_tokens: 300,
      total_tokens: 2306,
      prompt_tokens_details: { cached_tokens: 1920, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 192, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    };
    expect(tokensOf(usage)).toEqual({ prompt_tokens: 2006, completion_tokens: 300, cached_prompt_tokens: 1920, reasoning_tokens: 192 });
  });

  it("reads the Responses API's input and output details", () => {
    const usage = { input_tokens: 328, input_tokens_details: { cached_tokens: 128 }, output_tokens: 52, output_tokens_details: { reasoning_tokens: 40 }, total_tokens: 380 };
    expect(tokensOf(usage)).toEqual({ prompt_tokens: 328, completion_tokens: 52, cached_prompt_tokens: 128, reasoning_tokens: 40 });
  });

  it('leaves the parts out when the upstream reports none, or null ones (as some OpenAI-compatible servers do)', () => {
    expect(tokensOf({ prompt_tokens: 7, completion_tokens: 5 })).toEqual({ prompt_tokens: 7, completion_tokens: 5 });
    expect(tokensOf({ prompt_tokens: 7, completion_tokens: 5, prompt_tokens_details: null, completion_tokens_details: { reasoning_tokens: null } })).toEqual({
      prompt_tokens: 7,
      completion_tokens: 5,
    });
    expect(tokensOf({ prompt_tokens: 4, prompt_tokens_details: { cached_tokens: 2 } }, false)).toEqual({ prompt_tokens: 4, completion_tokens: 0, cached_prompt_tokens: 2 });
  });

  it('ignores an invalid detail and keeps the totals, which are what limits charge', () => {
    for (const bad of [-1, 1.5, '3', Number.NaN, 1e300, 11, {}]) {
      const tokens = tokensOf({ prompt_tokens: 10, completion_tokens: 10, prompt_tokens_details: { cached_tokens: bad }, completion_tokens_details: { reasoning_tokens: bad } });
      expect(tokens).toEqual({ prompt_tokens: 10, completion_tokens: 10 });
    }
    // A detail equal to its total is valid: the whole prompt came from the cache.
    expect(tokensOf({ prompt_tokens: 10, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 10 } })).toMatchObject({ cached_prompt_tokens: 10 });
    // Bad totals are still 'invalid', whatever the details.
    expect(tokensOf({ prompt_tokens: -1, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 0 } })).toBe('invalid');
    expect(tokensOf(null)).toBe('missing');
  });
});

describe("anthropicTokensOf: Anthropic's usage, with the cache inside the prompt tokens", () => {
  it('adds the cache reads and writes to input_tokens, as OpenAI counts its cached tokens in prompt_tokens', () => {
    const usage = { input_tokens: 12, cache_creation_input_tokens: 2048, cache_read_input_tokens: 30_000, output_tokens: 410, service_tier: 'standard' };
    expect(anthropicTokensOf(usage)).toEqual({ prompt_tokens: 32_060, completion_tokens: 410, cached_prompt_tokens: 30_000, cache_write_tokens: 2048 });
  });

  it("counts absent or null cache fields as 0 (a stream's merged message_start and message_delta)", () => {
    expect(anthropicTokensOf({ input_tokens: 25, output_tokens: 1 })).toEqual({ prompt_tokens: 25, completion_tokens: 1, cached_prompt_tokens: 0, cache_write_tokens: 0 });
    const merged = { ...{ input_tokens: 25, cache_read_input_tokens: null, cache_creation_input_tokens: 0, output_tokens: 1 }, ...{ output_tokens: 15 } };
    expect(anthropicTokensOf(merged)).toEqual({ prompt_tokens: 25, completion_tokens: 15, cached_prompt_tokens: 0, cache_write_tokens: 0 });
  });

  it("is 'invalid' when any part of the prompt is, since the total cannot be known, and 'missing' without an object", () => {
    for (const bad of [-1, 1.5, '3', Number.NaN, Number.MAX_SAFE_INTEGER + 2]) {
      expect(anthropicTokensOf({ input_tokens: 1, output_tokens: 1, cache_read_input_tokens: bad })).toBe('invalid');
      expect(anthropicTokensOf({ input_tokens: 1, output_tokens: 1, cache_creation_input_tokens: bad })).toBe('invalid');
      expect(anthropicTokensOf({ input_tokens: bad, output_tokens: 1 })).toBe('invalid');
      expect(anthropicTokensOf({ input_tokens: 1, output_tokens: bad })).toBe('invalid');
    }
    expect(anthropicTokensOf({ input_tokens: 1 })).toBe('invalid');
    // Parts each safe, their sum not.
    expect(anthropicTokensOf({ input_tokens: Number.MAX_SAFE_INTEGER, cache_read_input_tokens: 1, output_tokens: 1 })).toBe('invalid');
    for (const none of [undefined, null, 'usage', [1]]) expect(anthropicTokensOf(none)).toBe('missing');
  });
});

describe('costOf: each kind of token at its price', () => {
  const pricing = pricingFrom({ input_per_million: 3, output_per_million: 15, cached_input_per_million: 0.3, cache_write_per_million: 3.75 })!;

  it('prices the uncached input, the cache reads, the cache writes and the output (reasoning included) apart', () => {
    const usage = { prompt_tokens: 32_060, completion_tokens: 410, cached_prompt_tokens: 30_000, cache_write_tokens: 2048, reasoning_tokens: 100 };
    expect(costOf(pricing, usage)).toBeCloseTo((12 * 3 + 30_000 * 0.3 + 2048 * 3.75 + 410 * 15) / 1e6, 15);
    expect(costOf(pricing, { prompt_tokens: 1000, completion_tokens: 0 })).toBeCloseTo(0.003, 15);
    expect(costOf(null, usage)).toBe(0);
  });

  it('defaults the cache prices to the input price, so a pricing without them costs as before', () => {
    const plain = pricingFrom({ input_per_million: 2.5, output_per_million: 10 })!;
    expect(plain).toEqual({ inputPerMillion: 2.5, outputPerMillion: 10 });
    expect(costOf(plain, { prompt_tokens: 1000, completion_tokens: 100, cached_prompt_tokens: 900, cache_write_tokens: 50 })).toBeCloseTo((1000 * 2.5 + 100 * 10) / 1e6, 15);
  });

  it('never prices input twice when the parts exceed their whole', () => {
    expect(costOf(pricing, { prompt_tokens: 10, completion_tokens: 0, cached_prompt_tokens: 20 })).toBeCloseTo((20 * 0.3) / 1e6, 15);
  });

  it('reserves every prompt token at the dearest input price, so a cache write cannot cost more than was reserved', () => {
    expect(reservedCostOf(pricing, 1000, 100)).toBeCloseTo((1000 * 3.75 + 100 * 15) / 1e6, 15);
    for (const split of [0, 0.5, 1]) {
      const written = Math.round(1000 * split);
      expect(costOf(pricing, { prompt_tokens: 1000, completion_tokens: 100, cache_write_tokens: written })).toBeLessThanOrEqual(reservedCostOf(pricing, 1000, 100));
    }
    const cheapWrites = pricingFrom({ input_per_million: 3, output_per_million: 15, cache_write_per_million: 1 })!;
    expect(reservedCostOf(cheapWrites, 1000, 0)).toBeCloseTo(0.003, 15);
    expect(reservedCostOf(undefined, 1000, 100)).toBe(0);
  });
});
