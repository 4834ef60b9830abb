import { describe, expect, it } from 'vitest';
import { chatRequestOf } from '../../../src/model-call/anthropic/chat-request.js';
import { messagesReplyOf } from '../../../src/model-call/anthropic/messages-reply.js';

const completion = (message: Record<string, unknown>, choice: Record<string, unknown> = {}, usage: unknown = { prompt_tokens: 20, completion_tokens: 5, total_tokens: 25 }) => ({
  id: 'chatcmpl-8a7f3c2e91',
  object: 'chat.completion',
  created: 1_760_000_000,
  model: 'Qwen/Qwen3-32B',
  choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: 'stop', ...choice }],
  usage,
});

describe('messagesReplyOf', () => {
  it('answers a text completion in the Messages shape, naming the public model', () => {
    const { reply, usage } = messagesReplyOf(completion({ content: 'Hello!' }), 'claude-sonnet-4-5');
    expect(reply).toEqual({
      id: 'msg_8a7f3c2e91',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-5',
      content: [{ type: 'text', text: 'Hello!' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 20, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 5 },
    });
    expect(usage).toEqual({ prompt_tokens: 20, completion_tokens: 5 });
  });

  it('puts reasoning first as a thinking block, then text, then tool calls', () => {
    const message = {
      content: 'Let me check.',
      reasoning_content: 'The user wants the weather.',
      tool_calls: [
        { id: 'chatcmpl-tool-1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
        { id: 'chatcmpl-tool-2', type: 'function', function: { name: 'get_time', arguments: '' } },
      ],
    };
    const { reply } = messagesReplyOf(completion(message, { finish_reason: 'tool_calls' }), 'm');
    expect(reply.content).toEqual([
      { type: 'thinking', thinking: 'The user wants the weather.', signature: '' },
      { type: 'text', text: 'Let me check.' },
      { type: 'tool_use', id: 'chatcmpl-tool-1', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'chatcmpl-tool-2', name: 'get_time', input: {} },
    ]);
    expect(reply.stop_reason).toBe('tool_use');
  });

  it("reads vLLM's newer `reasoning` field, and answers no block for empty content", () => {
    expect(messagesReplyOf(completion({ content: '', reasoning: 'hm' }), 'm').reply.content).toEqual([{ type: 'thinking', thinking: 'hm', signature: '' }]);
    expect(messagesReplyOf(completion({ content: null }), 'm').reply.content).toEqual([]);
  });

  it('turns arguments that are not a JSON object into {}, and mints missing ids', () => {
    const calls = [
      { type: 'function', function: { name: 'a', arguments: '{"city": "Par' } },
      { id: 'c2', type: 'function', function: { name: 'b', arguments: '[1]' } },
      { id: 'c3', type: 'function', function: { name: 'c', arguments: { already: 'parsed' } } },
    ];
    const content = messagesReplyOf(completion({ content: null, tool_calls: calls }, { finish_reason: 'tool_calls' }), 'm').reply.content as Record<string, unknown>[];
    expect(content.map((block) => block.input)).toEqual([{}, {}, { already: 'parsed' }]);
    expect(content[0]!.id).toMatch(/^toolu_[0-9A-Za-z]{24}$/);
  });

  it.each([
    ['stop', {}, 'end_turn', null],
    ['length', {}, 'max_tokens', null],
    ['tool_calls', {}, 'tool_use', null],
    ['function_call', {}, 'tool_use', null],
    ['content_filter', {}, 'refusal', null],
    ['stop', { stop_reason: '###' }, 'stop_sequence', '###'],
    ['stop', { stop_reason: 151645 }, 'end_turn', null],
    ['stop', { stop_reason: null }, 'end_turn', null],
    ['stop', { matched_stop: 'END' }, 'stop_sequence', 'END'],
    [null, {}, 'end_turn', null],
    ['abort', {}, 'end_turn', null],
  ])('maps finish_reason %s (%j) to %s', (finishReason, extra, stopReason, stopSequence) => {
    const { reply } = messagesReplyOf(completion({ content: 'x' }, { finish_reason: finishReason, ...extra }), 'm');
    expect([reply.stop_reason, reply.stop_sequence]).toEqual([stopReason, stopSequence]);
  });

  it('answers tool_use for tool calls a server ended with stop, and refusal for a refusal', () => {
    const call = { id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } };
    expect(messagesReplyOf(completion({ content: null, tool_calls: [call] }), 'm').reply.stop_reason).toBe('tool_use');
    const { reply } = messagesReplyOf(completion({ content: null, refusal: "I can't help with that." }), 'm');
    expect(reply.content).toEqual([{ type: 'text', text: "I can't help with that." }]);
    expect(reply.stop_reason).toBe('refusal');
  });

  it('leaves cached reads out of input_tokens, as Anthropic counts them', () => {
    const usage = { prompt_tokens: 1200, completion_tokens: 40, total_tokens: 1240, prompt_tokens_details: { cached_tokens: 1024 } };
    const answer = messagesReplyOf(completion({ content: 'x' }, {}, usage), 'm');
    expect(answer.reply.usage).toEqual({ input_tokens: 176, cache_creation_input_tokens: 0, cache_read_input_tokens: 1024, output_tokens: 40 });
    expect(answer.usage).toMatchObject({ prompt_tokens: 1200, completion_tokens: 40, cached_prompt_tokens: 1024 });
  });

  it('reports usage it cannot charge as missing or invalid, showing zeros', () => {
    const zeros = { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 };
    const missing = messagesReplyOf({ ...completion({ content: 'x' }), usage: undefined }, 'm');
    expect([missing.usage, missing.reply.usage]).toEqual(['missing', zeros]);
    const invalid = messagesReplyOf(completion({ content: 'x' }, {}, { prompt_tokens: -1, completion_tokens: 2 }), 'm');
    expect([invalid.usage, invalid.reply.usage]).toEqual(['invalid', zeros]);
  });

  it('derives the message id from the completion id, or mints one', () => {
    expect(messagesReplyOf({ ...completion({ content: 'x' }), id: 'cmpl-abc_12.3' }, 'm').reply.id).toBe('msg_cmplabc123');
    expect(messagesReplyOf({ ...completion({ content: 'x' }), id: undefined }, 'm').reply.id).toMatch(/^msg_[0-9A-Za-z]{24}$/);
  });

  it('rejects a reply without choices as an upstream failure', () => {
    for (const chat of [null, 'text', {}, { choices: 'x' }]) {
      expect(() => messagesReplyOf(chat, 'm')).toThrow(expect.objectContaining({ statusCode: 502 }));
    }
  });
});

describe('a two-turn tool-use conversation, there and back', () => {
  const tools = [{ name: 'get_weather', description: 'Weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
  const first = { role: 'user', content: 'Weather in Paris and Rome?' };

  it('carries the answer of turn one into turn two as tool_calls followed by their results', () => {
    const turnOne = chatRequestOf({ model: 'claude', max_tokens: 512, tools, messages: [first] }, 'qwen3');
    expect(turnOne.tools).toEqual([{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: tools[0]!.input_schema } }]);

    const upstream = completion(
      {
        content: 'Checking both.',
        reasoning_content: 'Two cities.',
        tool_calls: [
          { id: 'call_p', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_r', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { finish_reason: 'tool_calls' },
    );
    const { reply } = messagesReplyOf(upstream, 'claude');
    expect(reply.stop_reason).toBe('tool_use');

    const toolUses = (reply.content as { type: string; id?: string }[]).filter((block) => block.type === 'tool_use');
    const results = toolUses.map((block, index) => ({ type: 'tool_result', tool_use_id: block.id, content: index === 0 ? '18°C' : '24°C' }));
    const turnTwo = chatRequestOf(
      { model: 'claude', max_tokens: 512, tools, messages: [first, { role: 'assistant', content: reply.content }, { role: 'user', content: [...results, { type: 'text', text: 'Which is warmer?' }] }] },
      'qwen3',
    );
    expect(turnTwo.messages).toEqual([
      { role: 'user', content: 'Weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: 'Checking both.',
        tool_calls: [
          { id: 'call_p', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_r', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_p', content: '18°C' },
      { role: 'tool', tool_call_id: 'call_r', content: '24°C' },
      { role: 'user', content: 'Which is warmer?' },
    ]);

    const final = messagesReplyOf(completion({ content: 'Rome is warmer.' }), 'claude').reply;
    expect([final.content, final.stop_reason]).toEqual([[{ type: 'text', text: 'Rome is warmer.' }], 'end_turn']);
  });
});
