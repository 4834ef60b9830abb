import { describe, expect, it } from 'vitest';
import { parseEventData } from '../../src/model-call/sse-relay.js';
import { ChatTranscript } from '../../src/model-call/chat-transcript.js';

/** The reference: every event parsed whole, the first choice's delta read from the parsed object. */
function referenceMessage(events: Buffer[]): unknown {
  let content = '';
  const toolCalls: { id?: string; type: string; function: { name: string; arguments: string } }[] = [];
  for (const event of events) {
    const delta = (parseEventData(event)?.choices as { delta?: Record<string, unknown> }[] | undefined)?.[0]?.delta;
    if (!delta) continue;
    if (typeof delta.content === 'string') content += delta.content;
    if (!Array.isArray(delta.tool_calls)) continue;
    for (const part of delta.tool_calls as { index?: number; id?: string; type?: string; function?: { name?: string; arguments?: string } }[]) {
      const call = (toolCalls[part.index ?? 0] ??= { type: 'function', function: { name: '', arguments: '' } });
      if (part.id) call.id = part.id;
      if (part.type) call.type = part.type;
      if (part.function?.name) call.function.name += part.function.name;
      if (part.function?.arguments) call.function.arguments += part.function.arguments;
    }
  }
  const calls = toolCalls.filter(Boolean);
  if (calls.length === 0) return { role: 'assistant', content };
  return { role: 'assistant', content: content === '' ? null : content, tool_calls: calls };
}

const chunk = (choices: unknown, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', ...extra, choices });
const sse = (data: string, end = '\n\n', prefix = 'data: ') => Buffer.from(`${prefix}${data}${end}`);

/** Events of every shape the fast path must read as the reference does, or leave to it. */
const events: Buffer[] = [
  sse(chunk([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }])),
  sse(chunk([{ index: 0, delta: { content: 'Hello' }, logprobs: null, finish_reason: null }])),
  sse(chunk([{ index: 0, delta: { content: ' "quoted", \\back\\slash\n and é 😀 \u0001' } }])),
  sse(chunk([{ index: 0, delta: { content: 'no space' } }]), '\n\n', 'data:'),
  sse(chunk([{ index: 0, delta: { content: 'crlf' } }]), '\r\n\r\n'),
  sse(`${chunk([{ index: 0, delta: { content: 'two' } }]).slice(0, 40)}\ndata: ${chunk([{ index: 0, delta: { content: 'two' } }]).slice(40)}`),
  sse(`{ "choices" : [ { "index" : 0 , "delta" : { "content" : "spaced" } } ] }`),
  sse(chunk([{ index: 0, delta: { content: null } }])),
  sse(chunk([{ index: 0, delta: { role: 'assistant' } }])),
  sse(chunk([{ index: 0, delta: { role: 'assistant', note: 'with \\ escape', content: 'escaped sibling' } }])),
  sse(chunk([{ index: 0, delta: { content: null, extra: [1] } }])),
  sse(chunk([{ index: 0, delta: { content: 42 } }])),
  sse(chunk([{ index: 0, delta: {} , finish_reason: 'stop' }])),
  sse(chunk([{ index: 0, logprobs: { content: [{ token: 'x', logprob: -1 }] }, delta: { content: ' after logprobs' } }])),
  sse(chunk([{ index: 0, delta: { content: ' before logprobs' }, logprobs: { content: [{ token: 'y' }] } }])),
  sse(chunk([{ index: 0, extra: { delta: { content: 'nested, not the delta' } }, delta: { content: ' direct' } }])),
  sse(chunk([{ index: 0 }, { index: 1, delta: { content: 'second choice only' } }])),
  sse(chunk([{ index: 1, delta: { content: ' first of two' } }, { index: 0, delta: { content: 'second of two' } }])),
  sse(chunk([{ index: 0, delta: { reasoning: { content: 'deep' }, content: ' flat?' } }])),
  sse(chunk([{ index: 0, delta: { role: 'assistant', tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_', arguments: '' } }] } }])),
  sse(chunk([{ index: 0, delta: { tool_calls: [{ index: 0, function: { name: 'weather', arguments: '{"city":' } }] } }])),
  sse(chunk([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Paris"' } }] } }])),
  sse(chunk([{ index: 0, delta: { content: ' text, then', tool_calls: [{ index: 0, function: { arguments: '}' } }] } }])),
  sse(JSON.stringify({ content: 'top-level content', choices: [{ index: 0, delta: { content: ' tail' } }] })),
  sse(JSON.stringify({ meta: { choices: [{ delta: { content: 'decoy' } }] }, choices: [{ index: 0, delta: { content: ' real' } }] })),
  sse(chunk([], { usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 } })),
  sse(chunk(null)),
  sse('"just a string"'),
  sse('[{"delta":{"content":"array root"}}]'),
  sse('[DONE]'),
  Buffer.from(': comment\n\n'),
  Buffer.from(`event: message\ndata: ${chunk([{ index: 0, delta: { content: ' with event field' } }])}\n\n`),
];

describe('ChatTranscript', () => {
  it('assembles each event as parsing it whole would', () => {
    for (const event of events) {
      const reply = new ChatTranscript();
      reply.onEvent(event);
      expect(reply.message(), event.toString()).toEqual(referenceMessage([event]));
    }
  });

  it('assembles a whole stream of mixed events as the reference does', () => {
    const reply = new ChatTranscript();
    for (const event of events) reply.onEvent(event);
    const expected = referenceMessage(events);
    expect(reply.message()).toEqual(expected);
    // The fixture covers text and tool calls both.
    expect(expected).toMatchObject({ tool_calls: [{ id: 'call_1', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] });
    expect((expected as { content: string }).content).toContain('Hello "quoted"');
  });
});
