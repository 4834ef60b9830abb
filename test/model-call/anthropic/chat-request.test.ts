import { describe, expect, it } from 'vitest';
import { chatRequestOf } from '../../../src/model-call/anthropic/chat-request.js';
import { rejection } from './rejection.js';

const user = (content: unknown) => ({ role: 'user', content });
const request = (fields: Record<string, unknown>) => ({ model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [user('hi')], ...fields });
const chatOf = (fields: Record<string, unknown>) => chatRequestOf(request(fields), 'qwen3');
const paramOf = (fields: Record<string, unknown>) => rejection(() => chatOf(fields));

describe('chatRequestOf: top-level fields', () => {
  it('names the upstream model and maps the sampling and output controls', () => {
    const chat = chatOf({
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      stop_sequences: ['###', 'END'],
      metadata: { user_id: 'user_abc_session_1' },
      stream: true,
    });
    expect(chat).toEqual({
      model: 'qwen3',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 1024,
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      stop: ['###', 'END'],
      stream: true,
      stream_options: { include_usage: true },
      user: 'user_abc_session_1',
    });
  });

  it('drops the controls with no OpenAI form, and fields it does not know', () => {
    const chat = chatOf({
      cache_control: { type: 'ephemeral' },
      context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] },
      container: 'container_1',
      mcp_servers: [{ type: 'url', url: 'https://mcp.example', name: 'x' }],
      service_tier: 'auto',
      stream: false,
      stop_sequences: [],
      metadata: {},
      some_future_field: 1,
    });
    expect(chat).toEqual({ model: 'qwen3', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1024 });
  });

  it('puts a system string or text blocks first, without cache_control', () => {
    expect(chatOf({ system: 'Be brief.' }).messages).toEqual([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }]);
    const blocks = [
      { type: 'text', text: "You are Claude Code, Anthropic's official CLI for Claude." },
      { type: 'text', text: 'Use tools.', cache_control: { type: 'ephemeral' } },
    ];
    expect(chatOf({ system: blocks }).messages).toEqual([
      { role: 'system', content: "You are Claude Code, Anthropic's official CLI for Claude.\nUse tools." },
      { role: 'user', content: 'hi' },
    ]);
    expect(chatOf({ system: [] }).messages).toEqual([{ role: 'user', content: 'hi' }]);
    expect(paramOf({ system: [{ type: 'image' }] }).param).toBe('system[0].type');
    expect(paramOf({ system: 3 }).param).toBe('system');
  });

  it.each([
    [{ thinking: { type: 'enabled', budget_tokens: 1024 } }, 'low'],
    [{ thinking: { type: 'enabled', budget_tokens: 4096 } }, 'medium'],
    [{ thinking: { type: 'enabled', budget_tokens: 16384 } }, 'high'],
    [{ thinking: { type: 'enabled', budget_tokens: 31999 } }, 'high'],
    [{ thinking: { type: 'adaptive' } }, 'high'],
    [{ thinking: { type: 'disabled' } }, undefined],
    [{ output_config: { effort: 'low' } }, 'low'],
    [{ output_config: { effort: 'medium' }, thinking: { type: 'enabled', budget_tokens: 31999 } }, 'medium'],
    [{ output_config: { effort: 'xhigh' } }, 'high'],
    [{ output_config: { effort: 'max' }, thinking: { type: 'adaptive' } }, 'high'],
    [{ output_config: { effort: 'low' }, thinking: { type: 'disabled' } }, 'low'],
  ])('maps %j to reasoning_effort %s', (fields, effort) => {
    expect(chatOf(fields).reasoning_effort).toBe(effort);
  });

  it('maps a JSON schema output format to a strict json_schema response_format', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] };
    const expected = { type: 'json_schema', json_schema: { name: 'output', schema, strict: true } };
    expect(chatOf({ output_config: { format: { type: 'json_schema', schema } } }).response_format).toEqual(expected);
    expect(chatOf({ output_format: { type: 'json_schema', schema } }).response_format).toEqual(expected);
    expect(paramOf({ output_config: { format: { type: 'xml' } } }).param).toBe('output_config.format.type');
    expect(paramOf({ output_format: { type: 'json_schema' } }).param).toBe('output_format.schema');
  });

  it.each([
    [{ messages: 'hi' }, 'messages'],
    [{ messages: undefined }, 'messages'],
    [{ stop_sequences: 'END' }, 'stop_sequences'],
    [{ stop_sequences: ['END', 3] }, 'stop_sequences'],
    [{ thinking: 'on' }, 'thinking'],
    [{ thinking: { type: 'enabled' } }, 'thinking.budget_tokens'],
    [{ output_config: { effort: 'extreme' } }, 'output_config.effort'],
  ])('answers %j with a 400 naming %s', (fields, param) => {
    expect(paramOf(fields)).toEqual({ status: 400, type: 'invalid_request_error', param });
  });
});

describe('chatRequestOf: tools', () => {
  const weather = {
    name: 'get_weather',
    description: 'The weather in a city',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    cache_control: { type: 'ephemeral' },
  };
  const fn = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weather.input_schema } };

  it('sends custom tools as functions, without cache_control or defer_loading', () => {
    const chat = chatOf({ tools: [weather, { name: 'Read', input_schema: { type: 'object' }, defer_loading: true, strict: true, type: 'custom' }] });
    expect(chat.tools).toEqual([fn, { type: 'function', function: { name: 'Read', parameters: { type: 'object' }, strict: true } }]);
    expect(chat).not.toHaveProperty('tool_choice');
  });

  it('drops server tools, and tool_choice when no tool is left', () => {
    const search = { type: 'web_search_20250305', name: 'web_search', max_uses: 5 };
    expect(chatOf({ tools: [search, weather] }).tools).toEqual([fn]);
    const chat = chatOf({ tools: [search, { type: 'bash_20250124', name: 'bash' }], tool_choice: { type: 'any' } });
    expect(chat).not.toHaveProperty('tools');
    expect(chat).not.toHaveProperty('tool_choice');
  });

  it.each([
    [{ type: 'auto' }, { tool_choice: 'auto' }],
    [{ type: 'any' }, { tool_choice: 'required' }],
    [{ type: 'none' }, { tool_choice: 'none' }],
    [{ type: 'tool', name: 'get_weather' }, { tool_choice: { type: 'function', function: { name: 'get_weather' } } }],
    [{ type: 'auto', disable_parallel_tool_use: true }, { tool_choice: 'auto', parallel_tool_calls: false }],
    [{ type: 'tool', name: 'get_weather', disable_parallel_tool_use: true }, { tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false }],
    [{ type: 'any', disable_parallel_tool_use: false }, { tool_choice: 'required' }],
  ])('maps tool_choice %j', (toolChoice, expected) => {
    const chat = chatOf({ tools: [weather], tool_choice: toolChoice });
    expect({ tool_choice: chat.tool_choice, ...(chat.parallel_tool_calls === undefined ? {} : { parallel_tool_calls: chat.parallel_tool_calls }) }).toEqual(expected);
  });

  it.each([
    [{ tools: {} }, 'tools'],
    [{ tools: [null] }, 'tools[0]'],
    [{ tools: [weather, { input_schema: {} }] }, 'tools[1].name'],
    [{ tools: [{ name: 'x' }] }, 'tools[0].input_schema'],
    [{ tools: [weather], tool_choice: 'auto' }, 'tool_choice'],
    [{ tools: [weather], tool_choice: { type: 'required' } }, 'tool_choice.type'],
    [{ tools: [weather], tool_choice: { type: 'tool' } }, 'tool_choice.name'],
  ])('answers %j with a 400 naming %s', (fields, param) => {
    expect(paramOf(fields).param).toBe(param);
  });
});
