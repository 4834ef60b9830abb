import { expect } from 'vitest';
import { MessagesStream } from '../../../src/model-call/anthropic/messages-stream.js';

export interface StreamEvent {
  event: string;
  data: Record<string, unknown>;
}

/** The events of Anthropic SSE text, checking each is `event: <type>` + `data: <json of that type>` + a blank line. */
export function eventsOf(text: string): StreamEvent[] {
  if (text === '') return [];
  expect(text.endsWith('\n\n')).toBe(true);
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((raw) => {
      const match = /^event: ([a-z_]+)\ndata: (.+)$/.exec(raw);
      expect(match, raw).not.toBeNull();
      const data = JSON.parse(match![2]!) as Record<string, unknown>;
      expect(data.type).toBe(match![1]);
      return { event: match![1]!, data };
    });
}

/** The SSE text a stream translates `chunks` into, then end(). */
export function translate(chunks: Record<string, unknown>[], stream = new MessagesStream('claude-sonnet-4-5')): string {
  let text = '';
  for (const chunk of chunks) text += stream.chunk(chunk);
  return text + stream.end();
}

/** An OpenAI chat chunk as vLLM sends it: one choice with `delta`, fields added to the choice. */
export const vllmChunk = (delta: Record<string, unknown>, choice: Record<string, unknown> = {}) => ({
  id: 'chatcmpl-b3f1c2d4e5',
  object: 'chat.completion.chunk',
  created: 1_760_000_000,
  model: 'Qwen/Qwen3-32B',
  choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...choice }],
});

export const usageChunk = (usage: Record<string, unknown>) => ({
  id: 'chatcmpl-b3f1c2d4e5',
  object: 'chat.completion.chunk',
  created: 1_760_000_000,
  model: 'Qwen/Qwen3-32B',
  choices: [],
  usage,
});

const toolFragment = (index: number, fields: Record<string, unknown>) => vllmChunk({ tool_calls: [{ index, ...fields }] });

/**
 * A vLLM stream (reasoning and hermes tool parsers): a role chunk, reasoning, text, two tool calls
 * with argument fragments, the finish chunk with its vLLM `stop_reason`, then the usage chunk.
 */
export const VLLM_TOOL_STREAM = [
  vllmChunk({ role: 'assistant', content: '' }),
  vllmChunk({ reasoning_content: 'The user wants ' }),
  vllmChunk({ reasoning_content: 'two "cities".' }),
  vllmChunk({ content: 'Checking ' }),
  vllmChunk({ content: 'both.\n' }),
  toolFragment(0, { id: 'chatcmpl-tool-9f2', type: 'function', function: { name: 'get_weather', arguments: '' } }),
  toolFragment(0, { function: { arguments: '{"city": "' } }),
  toolFragment(0, { function: { arguments: 'Paris"}' } }),
  toolFragment(1, { id: 'chatcmpl-tool-a41', type: 'function', function: { name: 'get_weather' } }),
  toolFragment(1, { function: { arguments: '{"city": "Ro' } }),
  toolFragment(1, { function: { arguments: 'me", "unit": "c"}' } }),
  vllmChunk({ content: '' }, { finish_reason: 'tool_calls', stop_reason: null }),
  usageChunk({ prompt_tokens: 812, total_tokens: 871, completion_tokens: 59, prompt_tokens_details: { cached_tokens: 512 } }),
];
