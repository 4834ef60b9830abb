import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MessagesUpstream, PLAIN_ANSWER, TOOL_INPUT, WEATHER_ANSWER } from './messages-upstream.js';

const WEATHER_TOOL = { name: 'get_weather', description: 'Weather of a city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } } };

/**
 * The native Messages backend of the e2e tests, read by the official SDK without a gateway between:
 * if the SDK accepts its replies as Anthropic's, what the e2e tests see through the gateway is the
 * gateway's doing.
 */
describe('messages upstream (test/support/messages-upstream.ts) as the Anthropic SDK reads it', () => {
  let upstream: MessagesUpstream;
  const client = (scenario: string) => new Anthropic({ apiKey: 'sk-test', baseURL: upstream.baseUrl(scenario).replace(/\/v1$/, ''), maxRetries: 0 });

  beforeAll(async () => {
    upstream = await MessagesUpstream.start({
      cached: { inputTokens: 5, cacheReadTokens: 100, cacheWriteTokens: 20, thinking: ['Let me', ' think.'] },
      cut: { broken: { afterDeltas: 2, how: 'cut' } },
      overloaded: { status: 529, statusTimes: 1 },
    });
  });
  afterAll(() => upstream?.close());

  it('answers JSON and streams, usage with cache reads and writes, a thinking block first', async () => {
    const params = { model: 'm', max_tokens: 100, messages: [{ role: 'user' as const, content: 'hi' }] };
    const whole = await client('cached').messages.create(params);
    expect(whole.content.map((block) => block.type)).toEqual(['thinking', 'text']);
    expect(whole.content[1]).toMatchObject({ type: 'text', text: PLAIN_ANSWER });
    expect(whole.usage).toMatchObject({ input_tokens: 5, cache_read_input_tokens: 100, cache_creation_input_tokens: 20, output_tokens: 6 });

    const streamed = await client('cached').messages.stream(params).finalMessage();
    expect(streamed.content).toEqual(whole.content);
    expect(streamed.usage).toMatchObject(whole.usage);
    // The wire's own order (the SDK does not surface pings): each event named on its `event:` line.
    const raw = await fetch(`${upstream.baseUrl('cached')}/messages`, { method: 'POST', body: JSON.stringify({ ...params, stream: true }) });
    const types = [...(await raw.text()).matchAll(/^event: (\w+)\ndata: \{"type":"(\w+)"/gm)].map((match) => (match[1] === match[2] ? match[1] : 'mismatch'));
    expect(types).toEqual([
      'message_start',
      'ping',
      ...['content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop'],
      ...['content_block_start', ...Array(4).fill('content_block_delta'), 'content_block_stop'],
      'message_delta',
      'message_stop',
    ]);
    expect(upstream.requests.at(-2)!.headers['anthropic-version']).toMatch(/^20\d\d-\d\d-\d\d$/);
  });

  it('calls get_weather (input_json_delta), answers from the tool result, honours max_tokens and counts tokens', async () => {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
    const call = await client('default').messages.stream({ model: 'm', max_tokens: 100, tools: [WEATHER_TOOL], messages }).finalMessage();
    expect(call.stop_reason).toBe('tool_use');
    const use = call.content[0] as Anthropic.ToolUseBlock;
    expect(use).toMatchObject({ type: 'tool_use', name: 'get_weather', input: TOOL_INPUT });
    messages.push({ role: 'assistant', content: call.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] });
    const answer = await client('default').messages.create({ model: 'm', max_tokens: 100, tools: [WEATHER_TOOL], messages });
    expect(answer).toMatchObject({ stop_reason: 'end_turn', content: [{ type: 'text', text: WEATHER_ANSWER }] });

    const bounded = await client('default').messages.create({ model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
    expect(bounded).toMatchObject({ stop_reason: 'max_tokens', usage: { output_tokens: 2 } });

    expect(await client('cached').messages.countTokens({ model: 'm', messages })).toEqual({ input_tokens: 125 });
    expect(upstream.requests.at(-1)!.route).toBe('/messages/count_tokens');
  });

  it('breaks off, answers Anthropic errors and then succeeds when told to fail only once', async () => {
    await expect(client('cut').messages.stream({ model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }).finalMessage()).rejects.toThrow();
    expect(upstream.requestsOf('cut').at(-1)).toMatchObject({ deltasSent: 2, completed: false });

    const first = client('overloaded').messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    await expect(first).rejects.toMatchObject({ status: 529, error: { type: 'error', error: { type: 'overloaded_error' } } });
    await expect(client('overloaded').messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })).resolves.toMatchObject({ type: 'message' });
  });
});
