import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { RequestCharges } from '../../src/quota/request-charge.js';
import { INLINE_IMAGE_TOKENS } from '../../src/core/operations.js';

const charges = new RequestCharges(
  defaultConfig({
    models: [
      { id: 'plain', upstream: 'http://127.0.0.1:1/v1' },
      { id: 'long', upstream: 'http://127.0.0.1:1/v1', max_output_tokens: 32_000 },
      { id: 'agent', upstream: 'http://127.0.0.1:1/v1', max_output_tokens: 64_000, reserve_output_tokens_max: 8_000 },
    ],
  }),
);
const message = (content: unknown) => ({ model: 'plain', messages: [{ role: 'user', content }] });
/** What `{ role: 'user', content: <text> }` adds besides the text: the bytes of its keys and of "user". */
const MESSAGE_OVERHEAD = 'role'.length + 'user'.length + 'content'.length;

describe('the charge of a request: a bound of what the upstream may charge for it', () => {
  it('reserves the largest max field the request names, whichever the upstream honours', () => {
    const charge = charges.of('chat', { ...message('hi'), max_tokens: 1, max_completion_tokens: 1000 });
    expect(charge.tokens - charge.promptTokens).toBe(1000);
    expect(charge.addedOutputLimit).toBeNull();
    expect(charges.of('responses', { model: 'plain', input: 'hi', max_output_tokens: 300, max_tokens: 2 }).tokens).toBe('hi'.length + 300);
  });

  it('multiplies the output by n or best_of, the larger', () => {
    expect(charges.of('chat', { ...message('hi'), max_tokens: 100, n: 10 }).tokens - charges.of('chat', message('hi')).promptTokens).toBe(1000);
    const completion = charges.of('completions', { model: 'plain', prompt: 'hi', max_tokens: 50, n: 2, best_of: 5 });
    expect(completion.tokens - completion.promptTokens).toBe(250);
  });

  it("names the model's max_output_tokens (else the default 4096) for a request that names no max field, to be added upstream", () => {
    const plain = charges.of('chat', message('hi'));
    expect(plain.addedOutputLimit).toBe(4096);
    expect(plain.tokens - plain.promptTokens).toBe(4096);
    const long = charges.of('chat', { model: 'long', messages: [], n: 3 });
    expect(long.addedOutputLimit).toBe(32_000);
    expect(long.tokens - long.promptTokens).toBe(96_000);
    expect(charges.of('embeddings', { model: 'plain', input: 'hi' })).toMatchObject({ tokens: 2, addedOutputLimit: null });
  });

  it('counts every token-bearing field by its UTF-8 bytes: CJK text, tools and their schemas, response_format, instructions', () => {
    const cjk = '你好世界'.repeat(100);
    expect(charges.of('chat', { ...message(cjk), max_tokens: 1 }).promptTokens).toBe(Buffer.byteLength(cjk) + MESSAGE_OVERHEAD);
    const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { city: { type: 'string', description: 'x'.repeat(5000) } } } } }];
    const withTools = charges.of('chat', { ...message('hi'), tools, response_format: { type: 'json_object' } });
    expect(withTools.promptTokens).toBeGreaterThan(5000 + 'lookup'.length);
    expect(withTools.promptTokens).toBeGreaterThan(charges.of('chat', message('hi')).promptTokens + JSON.stringify(tools).length / 2);
    const responses = charges.of('responses', { model: 'plain', instructions: 'Be brief. '.repeat(100), input: 'hi' });
    expect(responses.promptTokens).toBe(1000 + 2);
  });

  it('adds the stored history the upstream reads with the request', () => {
    expect(charges.of('chat', message('hi'), 100_000).promptTokens).toBe(100_000 + 2 + MESSAGE_OVERHEAD);
  });

  it('estimates an inlined image at a flat allowance, and text that looks like a data URL by its bytes', () => {
    const image = `data:image/png;base64,${'A'.repeat(1_000_000)}`;
    const withImage = charges.of('chat', message([{ type: 'image_url', image_url: { url: image } }]));
    expect(withImage.promptTokens).toBeLessThan(INLINE_IMAGE_TOKENS + 100);
    const text = `data:image/png;base64,${'A'.repeat(100_000)}`;
    expect(charges.of('chat', message([{ type: 'text', text }])).promptTokens).toBeGreaterThan(100_000);
  });

  it('caps only the token rate\'s share of the output with reserve_output_tokens_max; budgets reserve the whole bound', () => {
    const charge = charges.of('chat', { model: 'agent', messages: [], max_tokens: 64_000 });
    expect(charge.tokens).toBe(charge.promptTokens + 64_000);
    expect(charge.rateTokens).toBe(charge.promptTokens + 8_000);
    const small = charges.of('chat', { model: 'agent', messages: [], max_tokens: 100 });
    expect(small.rateTokens).toBe(small.tokens);
  });

  it('costs the reservation with every prompt token at the dearest input price, so a cache write cannot outrun a cost budget', () => {
    const priced = new RequestCharges(
      defaultConfig({
        models: [
          { id: 'plain', upstream: 'http://127.0.0.1:1/v1', pricing: { input_per_million: 2, output_per_million: 8 } },
          { id: 'writes', upstream: 'http://127.0.0.1:1/v1', pricing: { input_per_million: 3, output_per_million: 15, cached_input_per_million: 0.3, cache_write_per_million: 3.75 } },
        ],
      }),
    );
    const plain = priced.of('chat', { model: 'plain', messages: [], max_tokens: 100 });
    expect(plain.cost).toBeCloseTo((plain.promptTokens * 2 + 100 * 8) / 1e6, 15);
    const writes = priced.of('chat', { model: 'writes', messages: [], max_tokens: 100 });
    expect(writes.cost).toBeCloseTo((writes.promptTokens * 3.75 + 100 * 15) / 1e6, 15);
  });

  it('never estimates a text below its UTF-8 bytes, in any script', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        expect(charges.of('chat', { ...message(text), max_tokens: 1 }).promptTokens).toBe(Buffer.byteLength(text) + MESSAGE_OVERHEAD);
      }),
    );
  });
});
