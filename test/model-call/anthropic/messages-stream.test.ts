import { describe, expect, it } from 'vitest';
import { MessagesStream } from '../../../src/model-call/anthropic/messages-stream.js';
import { eventsOf, translate, usageChunk, VLLM_TOOL_STREAM, vllmChunk } from './stream-events.js';

const USAGE = usageChunk({ prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 });
const kinds = (text: string) => eventsOf(text).map(({ event, data }) => (typeof data.index === 'number' ? `${event}:${data.index}` : event));

describe('MessagesStream: a text answer', () => {
  it('writes the exact event sequence of Anthropic', () => {
    const stream = new MessagesStream('claude-sonnet-4-5', 'msg_fixed');
    let text = stream.chunk(vllmChunk({ role: 'assistant', content: '' }));
    expect(text).toBe(
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_fixed","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}\n\n',
    );
    expect(stream.outputStarted).toBe(false);
    text = stream.chunk(vllmChunk({ content: 'Hi "there"\n' }));
    expect(text).toBe(
      'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' +
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi \\"there\\"\\n"}}\n\n',
    );
    expect(stream.outputStarted).toBe(true);
    expect(stream.chunk(vllmChunk({ content: 'é✓' }))).toBe('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"é✓"}}\n\n');
    expect(stream.chunk(vllmChunk({}, { finish_reason: 'stop' }))).toBe('');
    expect(stream.completed).toBe(false);
    expect(stream.chunk(USAGE)).toBe(
      'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n' +
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":11,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":3}}\n\n' +
        'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    );
    expect([stream.completed, stream.usage]).toEqual([true, { prompt_tokens: 11, completion_tokens: 3 }]);
    expect(stream.chunk(vllmChunk({ content: 'late' }))).toBe('');
    expect(stream.end()).toBe('');
  });

  it('derives the message id from the first chunk and names the public model', () => {
    const [start] = eventsOf(new MessagesStream('my-model').chunk(vllmChunk({ role: 'assistant' })));
    expect(start!.data.message).toMatchObject({ id: 'msg_b3f1c2d4e5', model: 'my-model', content: [] });
  });

  it('sends nothing for empty choices, role-only and empty deltas, after message_start', () => {
    const stream = new MessagesStream('m');
    expect(kinds(stream.chunk({ id: 'x', choices: [] }))).toEqual(['message_start']);
    expect(stream.chunk(vllmChunk({ role: 'assistant' }))).toBe('');
    expect(stream.chunk(vllmChunk({ content: '', reasoning_content: null, tool_calls: [] }))).toBe('');
    expect(stream.chunk({ id: 'x', choices: [null, 'x'], usage: null })).toBe('');
    expect([stream.outputStarted, stream.usage]).toEqual([false, null]);
  });

  it('closes at once when the finish chunk carries the usage', () => {
    const text = translate([vllmChunk({ content: 'ok' }), { ...vllmChunk({}, { finish_reason: 'length' }), usage: { prompt_tokens: 5, completion_tokens: 1 } }]);
    const events = eventsOf(text);
    expect(events.map((event) => event.event)).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
    expect(events[4]!.data.delta).toEqual({ stop_reason: 'max_tokens', stop_sequence: null });
  });

  it('ignores a choice other than the first (n > 1)', () => {
    const text = translate([{ id: 'c', choices: [{ index: 1, delta: { content: 'other' } }, { index: 0, delta: { content: 'mine' } }] }]);
    expect(eventsOf(text).filter((event) => event.event === 'content_block_delta').map((event) => event.data.delta)).toEqual([{ type: 'text_delta', text: 'mine' }]);
  });
});

describe('MessagesStream: closing', () => {
  it('at end(), after a finish_reason with no usage chunk: zeros shown, usage stays null', () => {
    const stream = new MessagesStream('m');
    const text = translate([vllmChunk({ content: 'ok' }), vllmChunk({}, { finish_reason: 'stop' })], stream);
    const delta = eventsOf(text).find((event) => event.event === 'message_delta')!;
    expect(delta.data.usage).toEqual({ input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 });
    expect([stream.completed, stream.usage]).toEqual([true, null]);
    expect(kinds(text).slice(-3)).toEqual(['content_block_stop:0', 'message_delta', 'message_stop']);
  });

  it('without a finish_reason, end() sends nothing and leaves the stream for errorEvent to end', () => {
    const stream = new MessagesStream('m');
    let text = stream.chunk(vllmChunk({ content: 'partial' }));
    text += stream.chunk(USAGE);
    expect(stream.end()).toBe('');
    expect(stream.end()).toBe('');
    expect(stream.completed).toBe(false);
    expect(stream.usage).toEqual({ prompt_tokens: 11, completion_tokens: 3 });
    const error = stream.errorEvent('api_error', 'The model backend broke off the answer.');
    expect(error).toBe('event: error\ndata: {"type":"error","error":{"type":"api_error","message":"The model backend broke off the answer."}}\n\n');
    expect(kinds(text + error)).toEqual(['message_start', 'content_block_start:0', 'content_block_delta:0', 'error']);
    expect(stream.chunk(vllmChunk({ content: 'late' }, { finish_reason: 'stop' }))).toBe('');
  });

  it('sends nothing at end() when no chunk came', () => {
    const stream = new MessagesStream('m');
    expect(stream.end()).toBe('');
    expect(stream.completed).toBe(false);
  });

  it('ends early with an error event escaping its message', () => {
    expect(eventsOf(new MessagesStream('m').errorEvent('overloaded_error', 'a "quoted"\nline'))[0]!.data).toEqual({
      type: 'error',
      error: { type: 'overloaded_error', message: 'a "quoted"\nline' },
    });
  });

  it.each([
    [{ finish_reason: 'stop', stop_reason: '</answer>' }, 'stop_sequence', '</answer>'],
    [{ finish_reason: 'stop', stop_reason: 151645 }, 'end_turn', null],
    [{ finish_reason: 'stop', matched_stop: 'END' }, 'stop_sequence', 'END'],
    [{ finish_reason: 'length' }, 'max_tokens', null],
    [{ finish_reason: 'content_filter' }, 'refusal', null],
    [{ finish_reason: 'tool_calls' }, 'tool_use', null],
  ])('maps the finish chunk %j to %s', (choice, reason, sequence) => {
    const events = eventsOf(translate([vllmChunk({ content: 'x' }), vllmChunk({}, choice), USAGE]));
    expect(events.find((event) => event.event === 'message_delta')!.data.delta).toEqual({ stop_reason: reason, stop_sequence: sequence });
  });

  it('reports cached reads apart from input_tokens in message_delta', () => {
    const stream = new MessagesStream('m');
    const usage = { prompt_tokens: 2048, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 2000 }, completion_tokens_details: { reasoning_tokens: 5 } };
    const text = translate([vllmChunk({ content: 'x' }, { finish_reason: 'stop' }), usageChunk(usage)], stream);
    expect(eventsOf(text).find((event) => event.event === 'message_delta')!.data.usage).toEqual({
      input_tokens: 48,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 2000,
      output_tokens: 7,
    });
    expect(stream.usage).toMatchObject({ prompt_tokens: 2048, completion_tokens: 7, cached_prompt_tokens: 2000 });
  });

  it('keeps usage the server sends on every chunk, closing only after the finish_reason', () => {
    const running = (completion: number) => ({ prompt_tokens: 9, completion_tokens: completion });
    const stream = new MessagesStream('m');
    expect(kinds(stream.chunk({ ...vllmChunk({ content: 'a' }), usage: running(1) }))).not.toContain('message_stop');
    const text = stream.chunk({ ...vllmChunk({}, { finish_reason: 'stop' }), usage: running(2) });
    expect(kinds(text)).toEqual(['content_block_stop:0', 'message_delta', 'message_stop']);
    expect(stream.usage).toEqual(running(2));
  });
});

describe('MessagesStream: blocks', () => {
  it('rebuilds thinking, text and each tool call as blocks in order', () => {
    const stream = new MessagesStream('m');
    const events = eventsOf(translate(VLLM_TOOL_STREAM, stream));
    expect(events.map(({ event, data }) => (typeof data.index === 'number' ? `${event}:${data.index}` : event))).toEqual([
      'message_start',
      'content_block_start:0',
      'content_block_delta:0',
      'content_block_delta:0',
      'content_block_stop:0',
      'content_block_start:1',
      'content_block_delta:1',
      'content_block_delta:1',
      'content_block_stop:1',
      'content_block_start:2',
      'content_block_delta:2',
      'content_block_delta:2',
      'content_block_stop:2',
      'content_block_start:3',
      'content_block_delta:3',
      'content_block_delta:3',
      'content_block_stop:3',
      'message_delta',
      'message_stop',
    ]);
    const starts = events.filter((event) => event.event === 'content_block_start').map((event) => event.data.content_block);
    expect(starts).toEqual([
      { type: 'thinking', thinking: '', signature: '' },
      { type: 'text', text: '' },
      { type: 'tool_use', id: 'chatcmpl-tool-9f2', name: 'get_weather', input: {} },
      { type: 'tool_use', id: 'chatcmpl-tool-a41', name: 'get_weather', input: {} },
    ]);
    expect(events[2]!.data.delta).toEqual({ type: 'thinking_delta', thinking: 'The user wants ' });
    expect(events[10]!.data.delta).toEqual({ type: 'input_json_delta', partial_json: '{"city": "' });
    expect(events.at(-2)!.data).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'tool_use', stop_sequence: null },
      usage: { input_tokens: 300, cache_creation_input_tokens: 0, cache_read_input_tokens: 512, output_tokens: 59 },
    });
    expect(stream.completed).toBe(true);
  });

  it("reads vLLM's newer `reasoning` field as thinking", () => {
    const deltas = eventsOf(translate([vllmChunk({ reasoning: 'hm' }), vllmChunk({ content: 'ok' })])).filter((event) => event.event === 'content_block_delta');
    expect(deltas.map((event) => event.data.delta)).toEqual([
      { type: 'thinking_delta', thinking: 'hm' },
      { type: 'text_delta', text: 'ok' },
    ]);
  });

  it('counts a tool call as output, and mints an id when the server sent none', () => {
    const stream = new MessagesStream('m');
    const [, start] = eventsOf(stream.chunk(vllmChunk({ tool_calls: [{ index: 0, function: { name: 'f' } }] })));
    expect(stream.outputStarted).toBe(true);
    expect((start!.data.content_block as { id: string }).id).toMatch(/^toolu_[0-9A-Za-z]{24}$/);
  });

  it('opens a block per call when one chunk carries several whole calls, with or without index', () => {
    const calls = [
      { id: 'a', type: 'function', function: { name: 'f', arguments: '{"x":1}' } },
      { id: 'b', type: 'function', function: { name: 'g', arguments: { y: 2 } } },
    ];
    const text = translate([vllmChunk({ tool_calls: calls }, { finish_reason: 'tool_calls' })]);
    expect(kinds(text)).toEqual(['message_start', 'content_block_start:0', 'content_block_delta:0', 'content_block_stop:0', 'content_block_start:1', 'content_block_delta:1', 'content_block_stop:1', 'message_delta', 'message_stop']);
    expect(eventsOf(text)[5]!.data.delta).toEqual({ type: 'input_json_delta', partial_json: '{"y":2}' });
  });

  it('tells apart calls a server sends whole at index 0 by their ids', () => {
    const call = (id: string, name: string) => vllmChunk({ tool_calls: [{ index: 0, id, function: { name, arguments: '{}' } }] });
    const events = eventsOf(translate([call('a', 'f'), call('b', 'g'), vllmChunk({}, { finish_reason: 'tool_calls' })]));
    expect(events.filter((event) => event.event === 'content_block_start').map((event) => (event.data.content_block as { name: string }).name)).toEqual(['f', 'g']);
  });

  it('keeps a fragment that names the same id with its call', () => {
    const fragment = (args: string) => vllmChunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: args } }] });
    expect(kinds(translate([fragment('{"x"'), fragment(':1}')]))).toEqual(['message_start', 'content_block_start:0', 'content_block_delta:0', 'content_block_delta:0']);
  });

  it('sends a fragment of an interleaved call to its own block index', () => {
    const fragment = (index: number, fields: Record<string, unknown>) => vllmChunk({ tool_calls: [{ index, ...fields }] });
    const text = translate([
      fragment(0, { id: 'a', function: { name: 'f', arguments: '{"x":' } }),
      fragment(1, { id: 'b', function: { name: 'g', arguments: '{"y":2}' } }),
      fragment(0, { function: { arguments: '1}' } }),
      vllmChunk({}, { finish_reason: 'tool_calls' }),
    ]);
    expect(kinds(text)).toEqual(['message_start', 'content_block_start:0', 'content_block_delta:0', 'content_block_stop:0', 'content_block_start:1', 'content_block_delta:1', 'content_block_delta:0', 'content_block_stop:1', 'message_delta', 'message_stop']);
  });

  it('answers tool_use for tool calls a server ended with stop, and streams a refusal as text', () => {
    const tools = translate([vllmChunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: '{}' } }] }), vllmChunk({}, { finish_reason: 'stop' })]);
    expect(eventsOf(tools).at(-2)!.data.delta).toEqual({ stop_reason: 'tool_use', stop_sequence: null });
    const refusal = eventsOf(translate([vllmChunk({ refusal: 'No.' }), vllmChunk({}, { finish_reason: 'stop' })]));
    expect(refusal[2]!.data.delta).toEqual({ type: 'text_delta', text: 'No.' });
    expect(refusal.at(-2)!.data.delta).toEqual({ stop_reason: 'refusal', stop_sequence: null });
  });

  it('starts a new text block when text follows a tool call', () => {
    const text = translate([vllmChunk({ content: 'a' }), vllmChunk({ tool_calls: [{ index: 0, id: 't', function: { name: 'f', arguments: '{}' } }] }), vllmChunk({ content: 'b' })]);
    expect(kinds(text)).toEqual(['message_start', 'content_block_start:0', 'content_block_delta:0', 'content_block_stop:0', 'content_block_start:1', 'content_block_delta:1', 'content_block_stop:1', 'content_block_start:2', 'content_block_delta:2']);
  });
});
