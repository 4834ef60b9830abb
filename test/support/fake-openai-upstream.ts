import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An OpenAI-compatible backend on loopback that behaves like a real one for agent traffic: chat
 * with tool calls (it asks for `get_weather` when offered tools, then answers from the tool result),
 * legacy completions, embeddings (float or base64) and the Responses API (JSON and SSE, stored
 * responses). It names itself with its own model name (`served-<model>`), as real backends do, and
 * with `litellmUsage` it always sends a usage chunk shaped the way LiteLLM does.
 */
export interface FakeOpenAiOptions {
  litellmUsage?: boolean;
}

export interface SeenRequest {
  method: string;
  path: string;
  body: Record<string, unknown>;
}

type Json = Record<string, unknown>;

const PROMPT_TOKENS = 9;
export const WEATHER_ANSWER = 'It is sunny in Paris.';
export const PLAIN_ANSWER = 'Hello from the backend.';

const words = (text: string) => text.split(/(?<=\s)(?=\S)/);

export class FakeOpenAiUpstream {
  readonly requests: SeenRequest[] = [];
  private readonly responses = new Map<string, Json>();
  private sequence = 0;

  private constructor(
    private readonly server: Server,
    private readonly options: FakeOpenAiOptions,
  ) {}

  static async start(options: FakeOpenAiOptions = {}): Promise<FakeOpenAiUpstream> {
    const server = createServer();
    const fake = new FakeOpenAiUpstream(server, options);
    server.on('request', (request: IncomingMessage, response: ServerResponse) => void fake.handle(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  requestsTo(path: string): SeenRequest[] {
    return this.requests.filter((request) => request.path === path);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const body = (text ? JSON.parse(text) : {}) as Json;
    const path = (request.url ?? '').split('?')[0]!.replace(/^\/v1/, '');
    this.requests.push({ method: request.method ?? 'GET', path, body });
    const stored = /^\/responses\/([^/]+)(\/input_items)?$/.exec(path);
    if (stored) return this.storedResponse(request.method ?? 'GET', decodeURIComponent(stored[1]!), stored[2] !== undefined, response);
    if (path === '/chat/completions') return this.chat(body, response);
    if (path === '/completions') return this.completion(body, response);
    if (path === '/embeddings') return this.embeddings(body, response);
    if (path === '/responses') return this.createResponse(body, response);
    json(response, 404, { error: { message: `no route ${path}`, type: 'invalid_request_error' } });
  }

  private served(body: Json): string {
    return `served-${String(body.model)}`;
  }

  private chat(body: Json, response: ServerResponse): void {
    const messages = body.messages as Json[];
    const last = messages.at(-1)!;
    const offered = Array.isArray(body.tools) && body.tools.length > 0;
    const toolCall = offered && last.role !== 'tool' ? { id: `call_${++this.sequence}`, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } } : null;
    const answer = last.role === 'tool' ? WEATHER_ANSWER : PLAIN_ANSWER;
    const completionTokens = toolCall ? 6 : words(answer).length;
    const usage = { prompt_tokens: PROMPT_TOKENS, completion_tokens: completionTokens, total_tokens: PROMPT_TOKENS + completionTokens };
    const base = { id: `chatcmpl-${++this.sequence}`, created: 1_700_000_000, model: this.served(body), system_fingerprint: 'fp_fake' };
    if (body.stream !== true) {
      const message = toolCall ? { role: 'assistant', content: null, tool_calls: [toolCall] } : { role: 'assistant', content: answer };
      json(response, 200, { ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: toolCall ? 'tool_calls' : 'stop', logprobs: null }], usage });
      return;
    }
    const includeUsage = (body.stream_options as Json | undefined)?.include_usage === true;
    const chunk = (choices: unknown[], extra: Json = {}) => ({ ...base, object: 'chat.completion.chunk', choices, ...extra });
    const events: unknown[] = [chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }])];
    if (toolCall) {
      events.push(chunk([{ index: 0, delta: { tool_calls: [{ index: 0, ...toolCall, function: { name: 'get_weather', arguments: '' } }] }, finish_reason: null }]));
      for (const piece of ['{"city":', '"Paris"}']) {
        events.push(chunk([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: piece } }] }, finish_reason: null }]));
      }
    } else {
      for (const piece of words(answer)) events.push(chunk([{ index: 0, delta: { content: piece }, finish_reason: null }]));
    }
    events.push(chunk([{ index: 0, delta: {}, finish_reason: toolCall ? 'tool_calls' : 'stop' }]));
    if (this.options.litellmUsage) events.push(chunk([{ index: 0, delta: {} }], { usage }));
    else if (includeUsage) events.push(chunk([], { usage }));
    sse(response, events.map((event) => `data: ${JSON.stringify(event)}\n\n`));
  }

  private completion(body: Json, response: ServerResponse): void {
    const answer = ' and so on.';
    const usage = { prompt_tokens: PROMPT_TOKENS, completion_tokens: 3, total_tokens: PROMPT_TOKENS + 3 };
    const base = { id: `cmpl-${++this.sequence}`, object: 'text_completion', created: 1_700_000_000, model: this.served(body) };
    if (body.stream !== true) {
      json(response, 200, { ...base, choices: [{ index: 0, text: answer, finish_reason: 'stop', logprobs: null }], usage });
      return;
    }
    const includeUsage = (body.stream_options as Json | undefined)?.include_usage === true;
    const events: Json[] = words(answer).map((piece) => ({ ...base, choices: [{ index: 0, text: piece, finish_reason: null, logprobs: null }] }));
    events.push({ ...base, choices: [{ index: 0, text: '', finish_reason: 'stop', logprobs: null }] });
    if (includeUsage) events.push({ ...base, choices: [], usage });
    sse(response, events.map((event) => `data: ${JSON.stringify(event)}\n\n`));
  }

  private embeddings(body: Json, response: ServerResponse): void {
    const inputs = Array.isArray(body.input) ? body.input : [body.input];
    const data = inputs.map((_input, index) => {
      const vector = [0.25, -0.5, index];
      const embedding = body.encoding_format === 'base64' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector;
      return { object: 'embedding', index, embedding };
    });
    const prompt = inputs.length * 4;
    json(response, 200, { object: 'list', data, model: this.served(body), usage: { prompt_tokens: prompt, total_tokens: prompt } });
  }

  private responseObject(body: Json, status: string, text: string | null): Json {
    const id = `resp_${++this.sequence}fake`;
    const output = text === null ? [] : [{ type: 'message', id: `msg_${this.sequence}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }];
    return {
      id,
      object: 'response',
      created_at: 1_700_000_000,
      status,
      error: null,
      incomplete_details: null,
      instructions: body.instructions ?? null,
      model: this.served(body),
      output,
      parallel_tool_calls: true,
      previous_response_id: body.previous_response_id ?? null,
      store: body.store !== false,
      temperature: 1,
      text: { format: { type: 'text' } },
      tool_choice: 'auto',
      tools: [],
      top_p: 1,
      usage: text === null ? null : { input_tokens: PROMPT_TOKENS, input_tokens_details: { cached_tokens: 0 }, output_tokens: words(text).length, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: PROMPT_TOKENS + words(text).length },
      metadata: {},
    };
  }

  private createResponse(body: Json, response: ServerResponse): void {
    const previous = typeof body.previous_response_id === 'string' ? this.responses.get(body.previous_response_id) : undefined;
    if (body.previous_response_id && !previous) {
      json(response, 404, { error: { message: `Previous response with id '${String(body.previous_response_id)}' not found.`, type: 'invalid_request_error', param: 'previous_response_id', code: 'previous_response_not_found' } });
      return;
    }
    const text = previous ? 'Continuing from before.' : PLAIN_ANSWER;
    const done = this.responseObject(body, 'completed', text);
    if (body.store !== false) this.responses.set(String(done.id), done);
    if (body.stream !== true) return json(response, 200, done);
    const started = { ...done, status: 'in_progress', output: [], usage: null };
    const item = (done.output as Json[])[0]!;
    let sequence = 0;
    const event = (type: string, fields: Json) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...fields })}\n\n`;
    const events = [
      event('response.created', { response: started }),
      event('response.in_progress', { response: started }),
      event('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } }),
      event('response.content_part.added', { item_id: item.id, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }),
      ...words(text).map((piece) => event('response.output_text.delta', { item_id: item.id, output_index: 0, content_index: 0, delta: piece, logprobs: [] })),
      event('response.output_text.done', { item_id: item.id, output_index: 0, content_index: 0, text, logprobs: [] }),
      event('response.content_part.done', { item_id: item.id, output_index: 0, content_index: 0, part: { type: 'output_text', text, annotations: [] } }),
      event('response.output_item.done', { output_index: 0, item }),
      event('response.completed', { response: done }),
    ];
    sse(response, events);
  }

  private storedResponse(method: string, id: string, inputItems: boolean, response: ServerResponse): void {
    const stored = this.responses.get(id);
    if (!stored) return json(response, 404, { error: { message: `Response with id '${id}' not found.`, type: 'invalid_request_error', code: null } });
    if (method === 'DELETE') {
      this.responses.delete(id);
      return json(response, 200, { id, object: 'response.deleted', deleted: true });
    }
    if (inputItems) return json(response, 200, { object: 'list', data: [], first_id: null, last_id: null, has_more: false });
    json(response, 200, stored);
  }
}

function json(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

function sse(response: ServerResponse, events: string[]): void {
  response.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const event of events) response.write(event);
  if (events[0]?.startsWith('data:')) response.write('data: [DONE]\n\n');
  response.end();
}
