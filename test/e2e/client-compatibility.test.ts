import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { AIMessageChunk} from '@langchain/core/messages';
import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { ChatOpenAI, OpenAI as LangChainCompletions, OpenAIEmbeddings } from '@langchain/openai';
import { embedMany, generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { Redis } from 'ioredis';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { LoopbackUpstream, PLAIN_ANSWER, SDK_BACKEND, WEATHER_ANSWER } from '../support/loopback-upstream.js';
import { GatewayProcess } from '../support/gateway-process.js';
import type { TestProject } from '../support/test-app.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const PREFIX = `compat${randomBase62(8)}`;
const WEATHER_PARAMETERS = {
  type: 'object' as const,
  properties: { city: { type: 'string' as const } },
  required: ['city'],
  additionalProperties: false,
};
const OPENAI_TOOLS: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: WEATHER_PARAMETERS } },
];
const WEATHER_RESULT = '{"sky":"sunny"}';

/**
 * The official openai SDK, the Vercel AI SDK and LangChain, each through its own methods, against
 * the real gateway process, a real Redis and an OpenAI-compatible backend that calls tools, names
 * itself differently from the public model id, and serves completions, embeddings and responses.
 */
describe('client compatibility: openai SDK, Vercel AI SDK, LangChain (real process, real Redis)', () => {
  let upstream: LoopbackUpstream;
  let litellm: LoopbackUpstream;
  let gateway: GatewayProcess;
  let redis: Redis;
  let projectA: TestProject;
  let projectB: TestProject;
  let baseURL: string;

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({ default: SDK_BACKEND });
    litellm = await LoopbackUpstream.start({ default: { ...SDK_BACKEND, litellmUsage: true } });
    const all = '[chat, completions, embeddings, responses]';
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN },
      configYaml: `
models:
  - id: agent-1
    upstream: ${upstream.baseUrl()}
    upstream_model: backend/agent
    endpoints: ${all}
  - id: gpt-5-mini
    upstream: ${upstream.baseUrl()}
    endpoints: ${all}
  - id: litellm-1
    upstream: ${litellm.baseUrl()}
redis:
  key_prefix: ${PREFIX}
usage:
  flush_interval_ms: 50
`,
    });
    baseURL = `${gateway.url}/v1`;
    redis = new Redis(inject('redisUrl'));
    projectA = await gateway.createProject({ name: 'a' });
    projectB = await gateway.createProject({ name: 'b' });
  });

  afterAll(async () => {
    redis?.disconnect();
    await gateway?.stop();
    await upstream?.close();
    await litellm?.close();
  });

  const openai = (project = projectA) => new OpenAI({ apiKey: project.secret, baseURL, maxRetries: 0 });
  const lastRequest = (path: string) => upstream.requestsTo(path).at(-1)!;

  /** Total usage of a project since a minute ago, once what was sent has been flushed. */
  async function usageOf(project: TestProject, expected: (usage: UsageView) => boolean): Promise<UsageView> {
    const start = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 60_000).toISOString();
    let usage: UsageView | undefined;
    for (let attempt = 0; attempt < 60; attempt++) {
      const response = await fetch(`${baseURL}/projects/${project.projectId}/usage?start_time=${start}&end_time=${new Date(Date.now() + 120_000).toISOString()}`, {
        headers: project.auth,
      });
      usage = (await response.json()) as UsageView;
      if (expected(usage)) return usage;
      await sleep(100);
    }
    return usage!;
  }

  describe('openai SDK', () => {
    it('runs a two-turn tool loop with a developer message, without streaming; every answer names the public model', async () => {
      const client = openai();
      const messages: ChatCompletionMessageParam[] = [
        { role: 'developer', content: 'Answer in one sentence.' },
        { role: 'user', content: 'Weather in Paris?' },
      ];
      const first = await client.chat.completions.create({ model: 'agent-1', messages, tools: OPENAI_TOOLS });
      expect(first.model).toBe('agent-1');
      const call = first.choices[0]!.message.tool_calls![0]!;
      expect(call).toMatchObject({ type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } });
      messages.push(first.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: WEATHER_RESULT });
      const second = await client.chat.completions.create({ model: 'agent-1', messages, tools: OPENAI_TOOLS });
      expect(second.choices[0]!.message.content).toBe(WEATHER_ANSWER);
      expect(second.model).toBe('agent-1');
      const sent = lastRequest('/chat/completions').body;
      expect(sent.model).toBe('backend/agent');
      expect(sent.messages).toEqual([
        { role: 'developer', content: 'Answer in one sentence.' },
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: call.id, content: WEATHER_RESULT },
      ]);
      expect(sent.tools).toEqual(OPENAI_TOOLS);
    });

    it('runs the tool loop streaming; every chunk names the public model', async () => {
      const client = openai();
      const models = new Set<string>();
      const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
      const first = client.chat.completions.stream({ model: 'agent-1', messages, tools: OPENAI_TOOLS });
      first.on('chunk', (chunk) => models.add(chunk.model));
      const assistant = (await first.finalChatCompletion()).choices[0]!.message;
      const call = assistant.tool_calls![0]!;
      expect(call.type === 'function' && call.function.arguments).toBe('{"city":"Paris"}');
      messages.push(assistant, { role: 'tool', tool_call_id: call.id, content: WEATHER_RESULT });
      const second = client.chat.completions.stream({ model: 'agent-1', messages, tools: OPENAI_TOOLS });
      second.on('chunk', (chunk) => models.add(chunk.model));
      expect(await second.finalContent()).toBe(WEATHER_ANSWER);
      expect([...models]).toEqual(['agent-1']);
    });

    it('creates embeddings (base64, decoded by the SDK) and legacy completions, streaming and not', async () => {
      const client = openai();
      const embeddings = await client.embeddings.create({ model: 'agent-1', input: ['one', 'two'] });
      expect(embeddings.model).toBe('agent-1');
      expect(embeddings.data.map((item) => Array.from(item.embedding))).toEqual([
        [0.25, -0.5, 0],
        [0.25, -0.5, 1],
      ]);
      expect(embeddings.usage.prompt_tokens).toBe(8);
      const completion = await client.completions.create({ model: 'agent-1', prompt: 'Say' });
      expect(completion).toMatchObject({ model: 'agent-1', choices: [{ text: ' and so on.' }] });
      let text = '';
      for await (const chunk of await client.completions.create({ model: 'agent-1', prompt: 'Say', stream: true })) {
        expect(chunk.model).toBe('agent-1');
        expect(chunk).not.toHaveProperty('usage');
        text += chunk.choices[0]?.text ?? '';
      }
      expect(text).toBe(' and so on.');
    });

    it('creates, streams, continues, retrieves and deletes responses; another project cannot see them', async () => {
      const client = openai();
      const created = await client.responses.create({ model: 'agent-1', instructions: 'Be brief.', input: 'Hi' });
      expect(created.output_text).toBe(PLAIN_ANSWER);
      expect(created.model).toBe('agent-1');

      let streamedText = '';
      let completedModel = '';
      for await (const event of await client.responses.create({ model: 'agent-1', input: 'Hi', stream: true })) {
        if (event.type === 'response.output_text.delta') streamedText += event.delta;
        if (event.type === 'response.completed') completedModel = event.response.model;
      }
      expect(streamedText).toBe(PLAIN_ANSWER);
      expect(completedModel).toBe('agent-1');

      const continued = await client.responses.create({ model: 'agent-1', input: 'And?', previous_response_id: created.id });
      expect(continued.output_text).toBe('Continuing from before.');
      expect((await client.responses.retrieve(created.id)).id).toBe(created.id);

      const other = openai(projectB);
      await expect(other.responses.retrieve(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(other.responses.delete(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(other.responses.create({ model: 'agent-1', input: 'x', previous_response_id: created.id })).rejects.toMatchObject({
        status: 404,
        param: 'previous_response_id',
      });

      await client.responses.delete(created.id);
      await expect(client.responses.retrieve(created.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    });
  });

  describe('Vercel AI SDK', () => {
    const compatible = () => createOpenAICompatible({ name: 'nova', baseURL, apiKey: projectA.secret, includeUsage: true });
    const weather = tool({
      description: 'Weather of a city',
      inputSchema: jsonSchema<{ city: string }>(WEATHER_PARAMETERS),
      execute: async () => JSON.parse(WEATHER_RESULT) as { sky: string },
    });

    it('runs a stopWhen tool loop to the final answer, with and without streaming', async () => {
      const model = compatible().chatModel('agent-1');
      const options = { model, system: 'Be brief.', prompt: 'Weather in Paris?', tools: { get_weather: weather }, stopWhen: stepCountIs(3) };
      const generated = await generateText(options);
      expect(generated.text).toBe(WEATHER_ANSWER);
      expect(generated.steps).toHaveLength(2);
      expect(generated.response.modelId).toBe('agent-1');
      const streamed = streamText(options);
      expect(await streamed.text).toBe(WEATHER_ANSWER);
      expect((await streamed.steps).length).toBe(2);
      expect(lastRequest('/chat/completions').body.messages).toContainEqual(expect.objectContaining({ role: 'tool', content: WEATHER_RESULT }));
    });

    it('sends a system prompt as a developer message for a gpt-5 model id, and that works', async () => {
      const openaiProvider = createOpenAI({ baseURL, apiKey: projectA.secret });
      const generated = await generateText({ model: openaiProvider.chat('gpt-5-mini'), system: 'Be brief.', prompt: 'Hi' });
      expect(generated.text).toBe(PLAIN_ANSWER);
      expect(lastRequest('/chat/completions').body.messages).toContainEqual({ role: 'developer', content: 'Be brief.' });
    });

    it('embeds and completes through the openai-compatible provider', async () => {
      const embedded = await embedMany({ model: compatible().embeddingModel('agent-1'), values: ['one', 'two'] });
      expect(embedded.embeddings).toEqual([
        [0.25, -0.5, 0],
        [0.25, -0.5, 1],
      ]);
      expect(embedded.usage.tokens).toBe(8);
      const completed = await generateText({ model: compatible().completionModel('agent-1'), prompt: 'Say' });
      expect(completed.text).toBe(' and so on.');
    });

    it('uses the Responses API (the @ai-sdk/openai default), streaming and not', async () => {
      const openaiProvider = createOpenAI({ baseURL, apiKey: projectA.secret });
      const generated = await generateText({ model: openaiProvider.responses('gpt-5-mini'), prompt: 'Hi' });
      expect(generated.text).toBe(PLAIN_ANSWER);
      expect(generated.usage.inputTokens).toBe(9);
      const streamed = streamText({ model: openaiProvider.responses('gpt-5-mini'), prompt: 'Hi' });
      expect(await streamed.text).toBe(PLAIN_ANSWER);
      expect((await streamed.usage).outputTokens).toBe(4);
    });
  });

  describe('LangChain', () => {
    const chatModel = (fields: ConstructorParameters<typeof ChatOpenAI>[0] = {}) =>
      new ChatOpenAI({ model: 'agent-1', apiKey: projectA.secret, configuration: { baseURL }, maxRetries: 0, ...fields });

    it('runs a ToolMessage turn to the final answer, with and without streaming', async () => {
      const withTools = chatModel().bindTools(OPENAI_TOOLS);
      const messages: BaseMessage[] = [new SystemMessage('Be brief.'), new HumanMessage('Weather in Paris?')];
      const asked = await withTools.invoke(messages);
      expect(asked.tool_calls?.[0]).toMatchObject({ name: 'get_weather', args: { city: 'Paris' } });
      const answered = await withTools.invoke([...messages, asked, new ToolMessage({ tool_call_id: asked.tool_calls![0]!.id!, content: WEATHER_RESULT })]);
      expect(answered.content).toBe(WEATHER_ANSWER);
      expect(answered.response_metadata.model_name).toBe('agent-1');

      let streamed: AIMessageChunk | undefined;
      for await (const chunk of await withTools.stream(messages)) streamed = streamed ? streamed.concat(chunk) : chunk;
      const call = streamed!.tool_calls![0]!;
      expect(call).toMatchObject({ name: 'get_weather', args: { city: 'Paris' } });
      let text = '';
      const followUp = [...messages, new AIMessage({ content: '', tool_calls: [call] }), new ToolMessage({ tool_call_id: call.id!, content: WEATHER_RESULT })];
      for await (const chunk of await withTools.stream(followUp)) text += typeof chunk.content === 'string' ? chunk.content : '';
      expect(text).toBe(WEATHER_ANSWER);
    });

    it('embeds documents, completes text and uses the Responses API', async () => {
      const embeddings = new OpenAIEmbeddings({ model: 'agent-1', apiKey: projectA.secret, configuration: { baseURL }, maxRetries: 0 });
      expect(await embeddings.embedDocuments(['one', 'two'])).toEqual([
        [0.25, -0.5, 0],
        [0.25, -0.5, 1],
      ]);
      const completions = new LangChainCompletions({ model: 'agent-1', apiKey: projectA.secret, configuration: { baseURL }, maxRetries: 0 });
      expect(await completions.invoke('Say')).toBe(' and so on.');
      const responses = chatModel({ useResponsesApi: true });
      expect((await responses.invoke('Hi')).text).toBe(PLAIN_ANSWER);
      let streamed = '';
      for await (const chunk of await responses.stream('Hi')) streamed += chunk.text;
      expect(streamed).toBe(PLAIN_ANSWER);
    });
  });

  it('counts the tokens of completions, embeddings and responses (streamed too) in usage', async () => {
    const project = await gateway.createProject({ name: 'usage' });
    const client = openai(project);
    await client.completions.create({ model: 'agent-1', prompt: 'Say' }); // 9 + 3
    await client.embeddings.create({ model: 'agent-1', input: ['one', 'two'] }); // 8 + 0
    await client.responses.create({ model: 'agent-1', input: 'Hi' }); // 9 + 4
    for await (const event of await client.responses.create({ model: 'agent-1', input: 'Hi', stream: true })) void event; // 9 + 4
    const usage = await usageOf(project, (seen) => seen.requests >= 4 && seen.tokens.total >= 46);
    expect(usage.tokens).toEqual({ prompt: 35, completion: 11, total: 46, cached_prompt: 0, cache_write: 0, reasoning: 0 });
  });

  it('never sends an unasked usage chunk, of LiteLLM\'s shape either, and counts its tokens once', async () => {
    const project = await gateway.createProject({ name: 'litellm' });
    const response = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { ...project.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'litellm-1', messages: [{ role: 'user', content: 'Hi' }], stream: true }),
    });
    const text = await response.text();
    expect(text).toContain('"content":"Hello "');
    expect(text).not.toContain('"usage"');
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    await usageOf(project, (seen) => seen.tokens.total > 0);
    // Three more flush intervals: a second count would have landed by now.
    await sleep(300);
    expect((await usageOf(project, () => true)).tokens).toEqual({ prompt: 9, completion: 4, total: 13, cached_prompt: 0, cache_write: 0, reasoning: 0 });
  });

  it('stores nothing for a chat without store; store: true keeps tool calls and results, and DELETE frees the bytes', async () => {
    const project = await gateway.createProject({ name: 'storage' });
    const client = openai(project);
    const keysOfProject = () => redis.keys(`${PREFIX}:{${project.projectId}}:*`);
    const before = await keysOfProject();
    await client.chat.completions.create({ model: 'agent-1', messages: [{ role: 'user', content: 'Hi' }] });
    await sleep(200);
    const added = (await keysOfProject()).filter((key) => !before.includes(key));
    expect(added.every((key) => key.includes(':usage:') || key.includes(':rl:'))).toBe(true);

    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
    const { data: first, response } = await client.chat.completions
      .create({ model: 'agent-1', messages, tools: OPENAI_TOOLS, store: true })
      .withResponse();
    const conversationId = (first as unknown as { conversation_id: string }).conversation_id;
    expect(conversationId).toMatch(/^conv_/);
    expect(response.headers.get('content-type')).toMatch(/json/);
    const call = first.choices[0]!.message.tool_calls![0]!;
    const stream = await client.chat.completions.create({
      model: 'agent-1',
      messages: [{ role: 'tool', tool_call_id: call.id, content: WEATHER_RESULT }],
      tools: OPENAI_TOOLS,
      stream: true,
      conversation_id: conversationId,
    } as never);
    for await (const chunk of stream as unknown as AsyncIterable<unknown>) void chunk;

    const read = await fetch(`${baseURL}/conversations/${conversationId}?include_messages=true`, { headers: project.auth });
    const conversation = (await read.json()) as { messages: Record<string, unknown>[] };
    expect(conversation.messages.map(({ id: _id, created_at: _at, ...message }) => message)).toEqual([
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: WEATHER_RESULT },
      { role: 'assistant', content: WEATHER_ANSWER },
    ]);
    const stored = await usageOf(project, (seen) => seen.storage_bytes > 0);
    expect(stored.storage_bytes).toBeGreaterThan(0);

    const deleted = await fetch(`${baseURL}/conversations/${conversationId}`, { method: 'DELETE', headers: project.auth });
    expect(await deleted.json()).toMatchObject({ id: conversationId, deleted: true });
    expect((await keysOfProject()).some((key) => key.includes(':conv:'))).toBe(false);
    expect((await usageOf(project, (seen) => seen.storage_bytes === 0)).storage_bytes).toBe(0);
    const again = await fetch(`${baseURL}/conversations/${conversationId}`, { method: 'DELETE', headers: project.auth });
    expect(again.status).toBe(404);
  });
});

interface UsageView {
  requests: number;
  tokens: { prompt: number; completion: number; total: number; cached_prompt: number; cache_write: number; reasoning: number };
  storage_bytes: number;
}
