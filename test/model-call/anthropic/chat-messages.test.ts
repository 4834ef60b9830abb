import { describe, expect, it } from 'vitest';
import { chatRequestOf } from '../../../src/model-call/anthropic/chat-request.js';
import { rejection } from './rejection.js';

const messagesOf = (messages: unknown[]) => chatRequestOf({ model: 'claude', max_tokens: 64, messages }, 'up').messages as Record<string, unknown>[];
const paramOf = (messages: unknown[]) => rejection(() => messagesOf(messages)).param;
const text = (value: string, extra: Record<string, unknown> = {}) => ({ type: 'text', text: value, ...extra });
const base64 = (mediaType: string) => ({ type: 'image', source: { type: 'base64', media_type: mediaType, data: 'iVBORw0KGgo=' } });

describe('chatRequestOf: messages', () => {
  it('keeps string content, and joins text blocks as vLLM joins text parts', () => {
    expect(
      messagesOf([
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: 'hi' },
        { role: 'user', content: [text('<system-reminder>x</system-reminder>'), text('go on', { cache_control: { type: 'ephemeral' } })] },
        { role: 'assistant', content: [text('one', { citations: [] }), text('two')] },
      ]),
    ).toEqual([
      { role: 'user', content: 'hello' },
      { role: 'assistant', content: 'hi' },
      { role: 'user', content: '<system-reminder>x</system-reminder>\ngo on' },
      { role: 'assistant', content: 'one\ntwo' },
    ]);
  });

  it('rejects a role other than user or assistant, as Anthropic does (Claude Code retries without it)', () => {
    expect(rejection(() => messagesOf([{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }]))).toEqual({
      status: 400,
      type: 'invalid_request_error',
      param: 'messages[0].role',
    });
    expect(paramOf([{ role: 'user', content: 'a' }, { role: 'tool', content: 'b' }])).toBe('messages[1].role');
    expect(paramOf([{ content: 'b' }])).toBe('messages[0].role');
  });

  it.each([
    [[null], 'messages[0]'],
    [[{ role: 'user', content: 3 }], 'messages[0].content'],
    [[{ role: 'user', content: ['hi'] }], 'messages[0].content[0]'],
    [[{ role: 'user', content: [{ text: 'no type' }] }], 'messages[0].content[0]'],
    [[{ role: 'user', content: [{ type: 'text', text: 5 }] }], 'messages[0].content[0].text'],
    [[{ role: 'user', content: [{ type: 'document', source: { type: 'text', data: 'x', media_type: 'text/plain' } }] }], 'messages[0].content[0].type'],
    [[{ role: 'user', content: 'a' }, { role: 'assistant', content: [text('x'), { type: 'server_tool_use', id: 's', name: 'web_search', input: {} }] }], 'messages[1].content[1].type'],
    [[{ role: 'user', content: [{ type: 'search_result', source: 'x', title: 't', content: [] }] }], 'messages[0].content[0].type'],
    [[{ role: 'user', content: [{ type: 'tool_use', id: 't', name: 'n', input: {} }] }], 'messages[0].content[0].type'],
    [[{ role: 'assistant', content: [base64('image/png')] }], 'messages[0].content[0].type'],
    [[{ role: 'assistant', content: [{ type: 'tool_use', name: 'n', input: {} }] }], 'messages[0].content[0].id'],
    [[{ role: 'assistant', content: [{ type: 'tool_use', id: 't', input: {} }] }], 'messages[0].content[0].name'],
    [[{ role: 'user', content: [{ type: 'tool_result', content: 'x' }] }], 'messages[0].content[0].tool_use_id'],
    [[{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 7 }] }], 'messages[0].content[0].content'],
    [[{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'document' }] }] }], 'messages[0].content[0].content[0].type'],
  ])('answers %j with a 400 naming %s', (messages, param) => {
    expect(paramOf(messages)).toBe(param);
  });
});

describe('chatRequestOf: images', () => {
  it.each(['image/png', 'image/jpeg', 'image/gif', 'image/webp'])('sends base64 %s as a data URL', (mediaType) => {
    expect(messagesOf([{ role: 'user', content: [text('what is this?'), base64(mediaType)] }])).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'what is this?' },
          { type: 'image_url', image_url: { url: `data:${mediaType};base64,iVBORw0KGgo=` } },
        ],
      },
    ]);
  });

  it('sends a URL source as the image URL', () => {
    const url = 'https://example.com/cat.png';
    expect(messagesOf([{ role: 'user', content: [{ type: 'image', source: { type: 'url', url } }] }])).toEqual([
      { role: 'user', content: [{ type: 'image_url', image_url: { url } }] },
    ]);
  });

  it.each(['image/svg+xml', 'image/bmp', 'application/pdf', undefined])('rejects media type %s naming the field', (mediaType) => {
    const messages = [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }, { role: 'user', content: [text('see'), base64(mediaType as string)] }];
    expect(rejection(() => messagesOf(messages))).toEqual({ status: 400, type: 'invalid_request_error', param: 'messages[2].content[1].source.media_type' });
  });

  it.each([
    [{ type: 'image' }, 'messages[0].content[0].source'],
    [{ type: 'image', source: { type: 'file', file_id: 'file_1' } }, 'messages[0].content[0].source.type'],
    [{ type: 'image', source: { type: 'base64', media_type: 'image/png' } }, 'messages[0].content[0].source.data'],
    [{ type: 'image', source: { type: 'url' } }, 'messages[0].content[0].source.url'],
  ])('rejects %j naming %s', (block, param) => {
    expect(paramOf([{ role: 'user', content: [block] }])).toBe(param);
  });
});

describe('chatRequestOf: tool use', () => {
  const call = { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } };

  it('sends tool_use as tool_calls with JSON arguments, and drops thinking from earlier turns', () => {
    const messages = messagesOf([
      { role: 'user', content: 'weather?' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'I should call the tool', signature: 'sig' },
          { type: 'redacted_thinking', data: 'opaque' },
          text('Checking.'),
          call,
          { type: 'tool_use', id: 'call_2', name: 'get_time', input: {} },
        ],
      },
    ]);
    expect(messages[1]).toEqual({
      role: 'assistant',
      content: 'Checking.',
      tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
        { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{}' } },
      ],
    });
  });

  it('sends tool results as tool messages right after the calls, then the user text and images', () => {
    const messages = messagesOf([
      { role: 'user', content: 'weather and a chart?' },
      { role: 'assistant', content: [call, { type: 'tool_use', id: 'call_2', name: 'chart', input: {} }] },
      {
        role: 'user',
        content: [
          text('Also, hurry.'),
          { type: 'tool_result', tool_use_id: 'call_1', content: [text('18°C'), text('sunny')], cache_control: { type: 'ephemeral' } },
          { type: 'tool_result', tool_use_id: 'call_2', content: [text('chart:'), base64('image/png'), { type: 'tool_reference', tool_name: 'chart' }] },
        ],
      },
    ]);
    expect(messages.slice(1)).toEqual([
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'call_2', type: 'function', function: { name: 'chart', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '18°C\nsunny' },
      { role: 'tool', tool_call_id: 'call_2', content: 'chart:' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Also, hurry.' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        ],
      },
    ]);
  });

  it('sends only tool messages for a turn of tool results, marking errors in the text', () => {
    const messages = messagesOf([
      { role: 'assistant', content: [call, { ...call, id: 'call_2' }, { ...call, id: 'call_3' }] },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_1', content: 'City not found', is_error: true },
          { type: 'tool_result', tool_use_id: 'call_2', is_error: true },
          { type: 'tool_result', tool_use_id: 'call_3', is_error: false },
        ],
      },
    ]);
    expect(messages.slice(1)).toEqual([
      { role: 'tool', tool_call_id: 'call_1', content: 'Error: City not found' },
      { role: 'tool', tool_call_id: 'call_2', content: 'Error' },
      { role: 'tool', tool_call_id: 'call_3', content: '' },
    ]);
  });

  it('checks the media type of an image in a tool result', () => {
    const result = { type: 'tool_result', tool_use_id: 'call_1', content: [base64('image/tiff')] };
    expect(paramOf([{ role: 'assistant', content: [call] }, { role: 'user', content: [result] }])).toBe('messages[1].content[0].content[0].source.media_type');
  });
});
