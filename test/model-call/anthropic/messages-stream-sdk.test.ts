import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { MessagesStream } from '../../../src/model-call/anthropic/messages-stream.js';
import { translate, usageChunk, VLLM_TOOL_STREAM, vllmChunk } from './stream-events.js';

/** SSE text as a response body arriving `every` bytes at a time, as a socket would cut it. */
function sseResponse(text: string, every = 7): Response {
  const bytes = new TextEncoder().encode(text);
  let offset = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.subarray(offset, offset + every));
      offset += every;
    },
  });
  return new Response(body, { headers: { 'content-type': 'text/event-stream', 'request-id': 'req_test' } });
}

/** The official client reading `text` as the answer of a streamed messages.create, through its own accumulator. */
function clientStream(text: string) {
  const client = new Anthropic({ apiKey: 'test', baseURL: 'http://127.0.0.1:9', maxRetries: 0, fetch: async () => sseResponse(text) });
  return client.messages.stream({ model: 'qwen3-coder', max_tokens: 1024, messages: [{ role: 'user', content: 'weather?' }] });
}

describe('MessagesStream read by the official Anthropic SDK', () => {
  it('assembles a realistic vLLM stream into the final message', { timeout: 10_000 }, async () => {
    const message = await clientStream(translate(VLLM_TOOL_STREAM, new MessagesStream('qwen3-coder'))).finalMessage();
    expect(message).toMatchObject({
      id: 'msg_b3f1c2d4e5',
      type: 'message',
      role: 'assistant',
      model: 'qwen3-coder',
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 300, cache_read_input_tokens: 512, cache_creation_input_tokens: 0, output_tokens: 59 },
    });
    expect(message.content).toEqual([
      { type: 'thinking', thinking: 'The user wants two "cities".', signature: '' },
      { type: 'text', text: 'Checking both.\n' },
      { type: 'tool_use', id: 'chatcmpl-tool-9f2', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'chatcmpl-tool-a41', name: 'get_weather', input: { city: 'Rome', unit: 'c' } },
    ]);
  });

  it('fires the text and input events a client renders as they come', { timeout: 10_000 }, async () => {
    const stream = clientStream(translate(VLLM_TOOL_STREAM));
    const texts: string[] = [];
    const inputs: unknown[] = [];
    stream.on('text', (delta) => texts.push(delta));
    stream.on('inputJson', (_partial, snapshot) => inputs.push(snapshot));
    await stream.done();
    expect(texts).toEqual(['Checking ', 'both.\n']);
    expect(inputs.at(-1)).toEqual({ city: 'Rome', unit: 'c' });
  });

  it('ends with the stop sequence vLLM names', { timeout: 10_000 }, async () => {
    const chunks = [
      vllmChunk({ role: 'assistant', content: '' }),
      vllmChunk({ content: 'Answer: 42' }),
      vllmChunk({ content: '' }, { finish_reason: 'stop', stop_reason: '</answer>' }),
      usageChunk({ prompt_tokens: 30, completion_tokens: 6 }),
    ];
    const message = await clientStream(translate(chunks)).finalMessage();
    expect([message.content, message.stop_reason, message.stop_sequence, message.usage.input_tokens]).toEqual([
      [{ type: 'text', text: 'Answer: 42' }],
      'stop_sequence',
      '</answer>',
      30,
    ]);
  });

  it('assembles an interleaved tool call by its block index', { timeout: 10_000 }, async () => {
    const fragment = (index: number, fields: Record<string, unknown>) => vllmChunk({ tool_calls: [{ index, ...fields }] });
    const chunks = [
      fragment(0, { id: 'a', function: { name: 'f', arguments: '{"x":' } }),
      fragment(1, { id: 'b', function: { name: 'g', arguments: '{"y":2}' } }),
      fragment(0, { function: { arguments: '1}' } }),
      vllmChunk({}, { finish_reason: 'tool_calls' }),
      usageChunk({ prompt_tokens: 3, completion_tokens: 4 }),
    ];
    const message = await clientStream(translate(chunks)).finalMessage();
    expect(message.content.map((block) => (block.type === 'tool_use' ? block.input : block))).toEqual([{ x: 1 }, { y: 2 }]);
  });

  it('raises the error event of a stream that broke off as the SDK error of its type', { timeout: 10_000 }, async () => {
    const stream = new MessagesStream('qwen3-coder');
    let text = stream.chunk(vllmChunk({ content: 'Half an ans' }));
    text += stream.end();
    text += stream.errorEvent('api_error', 'The model backend broke off the answer.');
    const error: unknown = await clientStream(text)
      .finalMessage()
      .then(
        () => null,
        (caught: unknown) => caught,
      );
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect(error).toMatchObject({ type: 'api_error', error: { error: { type: 'api_error', message: 'The model backend broke off the answer.' } } });
  });
});
