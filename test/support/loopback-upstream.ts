import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseJson, readBody, readTarget, ScenarioLoopbackServer } from './loopback-server.js';
import { silentWav } from './wav.js';

/**
 * The tests' one OpenAI-compatible backend on a loopback port. A base URL names a scenario
 * (`/<scenario>/v1`), and each scenario answers by its behaviour. What it serves, below `/v1`:
 * chat completions (JSON and SSE; it calls `get_weather` when offered tools, then answers from the
 * tool result), legacy completions, embeddings (float or base64), the Responses API (JSON and
 * SSE, stored responses: retrieve, delete, input items) and the creation routes: fine-tuning
 * jobs, image generations, speech and transcriptions. It names itself with its own model name
 * (`served-<model>`), as real backends do, and records every request.
 */
export interface UpstreamBehavior {
  /** HTTP status; non-2xx answers carry `errorBody` (default an OpenAI-style error). */
  status?: number;
  errorBody?: unknown;
  headers?: Record<string, string>;
  /** Wait before the response headers. */
  latencyMs?: number;
  /** Never answer (keeps the connection open). */
  hang?: boolean;
  /** The answer of chat (and of responses), one piece a stream chunk and a completion token. */
  chunks?: string[];
  /** Streams: wait between content chunks. */
  chunkDelayMs?: number;
  /** Streams: after this many content chunks, destroy the socket. */
  closeAfterChunks?: number;
  /** Streams: after this many content chunks, stop sending but keep the connection open. */
  hangAfterChunks?: number;
  /** Report usage (JSON always unless false; streams when include_usage is asked). */
  usage?: boolean;
  /** Streams: always end with a usage chunk shaped the way LiteLLM sends it, asked or not. */
  litellmUsage?: boolean;
  promptTokens?: number;
  /** Chat and completions usage: add `prompt_tokens_details.cached_tokens` / `completion_tokens_details.reasoning_tokens`. */
  usageDetails?: { cached_tokens?: number; reasoning_tokens?: number };
  /** Seconds of speech /audio/speech returns (a real WAV of that length). */
  speechSeconds?: number;
  /** Whether /audio/transcriptions reports `duration` (verbose_json does upstream). */
  reportDuration?: boolean;
  /** The fine-tuning job id /fine_tuning/jobs mints. */
  jobId?: string;
  /** A `usage` object /images/generations reports (token-priced image models do). */
  imageUsage?: Record<string, number>;
  /** Answer every route with this body as written (content type from `headers`, default JSON). */
  body?: string;
  /** With `body`: after it, end the reply (default), send nothing more ('stall') or cut the connection 20 ms later ('cut'). */
  afterBody?: 'end' | 'stall' | 'cut';
  /**
   * Answer every route with `head`, then `count` pieces as fast as the reader takes them
   * (honouring backpressure), then `tail`; it stops where the connection closes. The request's
   * `bytesWritten` and `bytesFlushed` count the pieces.
   */
  flood?: { head?: string; piece: (n: number) => string | Buffer; count: number; tail?: string };
}

export interface UpstreamRequest {
  scenario: string;
  method: string;
  /** The request target as the server saw it: `/<scenario>/v1/chat/completions?…`. */
  path: string;
  /** The route below `/v1`, without the query: `/chat/completions`. */
  route: string;
  headers: IncomingMessage['headers'];
  /** A JSON body parsed; {} for none, another type or one that does not parse. */
  body: Record<string, unknown>;
  /** A multipart body's fields and the size of its file. */
  multipart: { fields: Record<string, string>; fileName: string | null; fileBytes: number } | null;
  /** The client side closed the connection before the response was complete. */
  aborted: boolean;
  completed: boolean;
  /** The response is over: sent whole, or its connection closed. */
  closed: boolean;
  /** Content chunks written before the end or the abort. */
  chunksSent: number;
  /** A flood's pieces handed to the socket, and those it has taken off our hands (written out). */
  bytesWritten: number;
  bytesFlushed: number;
}

type Json = Record<string, unknown>;

export const PLAIN_ANSWER = 'Hello from the backend.';
export const WEATHER_ANSWER = 'It is sunny in Paris.';
const CONTINUED_ANSWER = 'Continuing from before.';
const COMPLETION_PIECES = [' and', ' so', ' on.'];
const DEFAULT_CHUNKS = ['Hello', ' from', ' the', ' fake', ' upstream.'];

/** A text in word pieces, each with the white space after it: as a backend streams its tokens. */
export const words = (text: string): string[] => text.split(/(?<=\s)(?=\S)/);

/** A backend as client SDKs meet it: a sentence in words, 9 prompt tokens. */
export const SDK_BACKEND: UpstreamBehavior = { chunks: words(PLAIN_ANSWER), promptTokens: 9 };

/** What a stream writes: the events before its content, the content pieces, the events after. */
interface Events {
  opening: string[];
  pieces: string[];
  closing: string[];
}

const data = (event: unknown) => `data: ${JSON.stringify(event)}\n\n`;

export class LoopbackUpstream extends ScenarioLoopbackServer<UpstreamBehavior, UpstreamRequest> {
  private readonly stored = new Map<string, Json>();
  private sequence = 0;

  private constructor() {
    super('loopback upstream');
  }

  static async start(behaviors: Record<string, UpstreamBehavior> = {}): Promise<LoopbackUpstream> {
    return new LoopbackUpstream().listen(behaviors);
  }

  protected async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const raw = await readBody(request);
    const { path, scenario, route } = readTarget(request);
    const contentType = request.headers['content-type'] ?? '';
    const recorded: UpstreamRequest = {
      scenario,
      method: request.method ?? 'GET',
      path,
      route,
      headers: request.headers,
      body: contentType.startsWith('multipart/form-data') ? {} : parseJson(raw.toString('utf8')),
      multipart: contentType.startsWith('multipart/form-data') ? parseMultipart(raw, contentType) : null,
      aborted: false,
      completed: false,
      closed: false,
      chunksSent: 0,
      bytesWritten: 0,
      bytesFlushed: 0,
    };
    this.record(recorded, response);

    const behavior = this.behaviors.get(scenario) ?? {};
    if (behavior.hang) return;
    if (behavior.latencyMs) await sleep(behavior.latencyMs);
    if (response.destroyed) return;
    const status = behavior.status ?? 200;
    if (status < 200 || status >= 300) {
      const error = behavior.errorBody ?? { error: { message: `fake upstream says ${status}`, type: 'fake_error', code: null } };
      return this.send(response, recorded, behavior, status, error);
    }
    if (behavior.body !== undefined) return this.sendBody(response, behavior);
    if (behavior.flood) return this.flood(response, recorded, behavior, behavior.flood);
    const stored = /^\/responses\/([^/]+)(\/input_items)?$/.exec(recorded.route);
    if (stored) return this.storedResponse(response, recorded, behavior, decodeURIComponent(stored[1]!), stored[2] !== undefined);
    const body = recorded.body;
    switch (recorded.route) {
      case '/chat/completions':
        return this.chat(response, recorded, behavior);
      case '/completions':
        return this.completion(response, recorded, behavior);
      case '/embeddings':
        return this.embeddings(response, recorded, behavior);
      case '/responses':
        return this.createResponse(response, recorded, behavior);
      case '/fine_tuning/jobs':
        return this.send(response, recorded, behavior, 200, {
          id: behavior.jobId ?? 'ftjob-fake123',
          object: 'fine_tuning.job',
          status: 'queued',
          model: body.model,
          training_file: body.training_file,
          created_at: 1_700_000_000,
        });
      case '/images/generations': {
        const images = Array.from({ length: Number(body.n ?? 1) }, (_, i) => ({ url: `https://images.example/${i}.png` }));
        return this.send(response, recorded, behavior, 200, { created: 1_700_000_000, data: images, ...(behavior.imageUsage ? { usage: behavior.imageUsage } : {}) });
      }
      case '/audio/speech':
        return this.send(response, recorded, behavior, 200, silentWav(behavior.speechSeconds ?? 2), 'audio/wav');
      case '/audio/transcriptions':
        return this.send(response, recorded, behavior, 200, {
          text: 'hello from the fake transcriber',
          language: 'english',
          ...(behavior.reportDuration === false ? {} : { duration: 4.25 }),
        });
    }
    this.send(response, recorded, behavior, 404, { error: { message: `no route ${recorded.route}`, type: 'invalid_request_error', code: null } });
  }

  private send(response: ServerResponse, recorded: UpstreamRequest, behavior: UpstreamBehavior, status: number, body: unknown, type = 'application/json'): void {
    response.writeHead(status, { 'content-type': type, ...behavior.headers });
    response.end(Buffer.isBuffer(body) ? body : JSON.stringify(body));
    recorded.completed = true;
  }

  private sendBody(response: ServerResponse, behavior: UpstreamBehavior): void {
    response.writeHead(200, { 'content-type': 'application/json', ...behavior.headers });
    if (behavior.afterBody === 'stall') response.write(behavior.body);
    else if (behavior.afterBody === 'cut') response.write(behavior.body, () => setTimeout(() => response.socket?.destroy(), 20));
    else response.end(behavior.body);
  }

  private flood(response: ServerResponse, recorded: UpstreamRequest, behavior: UpstreamBehavior, flood: NonNullable<UpstreamBehavior['flood']>): void {
    response.writeHead(200, { 'content-type': 'application/json', ...behavior.headers });
    if (flood.head) response.write(flood.head);
    let n = 0;
    const more = () => {
      while (n < flood.count && !recorded.closed) {
        const piece = flood.piece(n++);
        const bytes = Buffer.byteLength(piece);
        recorded.bytesWritten += bytes;
        if (!response.write(piece, () => (recorded.bytesFlushed += bytes))) {
          // Both listeners go once either fires (one left behind per wait would pile up on the response).
          const next = () => {
            response.off('drain', next);
            response.off('close', next);
            more();
          };
          response.once('drain', next);
          response.once('close', next);
          return;
        }
      }
      if (!recorded.closed) response.end(flood.tail);
    };
    more();
  }

  /** Writes a stream's events, its content pieces paced and broken off as the behaviour says. */
  private async stream(response: ServerResponse, recorded: UpstreamRequest, behavior: UpstreamBehavior, events: Events, done: boolean): Promise<void> {
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...behavior.headers });
    for (const event of events.opening) response.write(event);
    for (const piece of events.pieces) {
      if (behavior.chunkDelayMs) await sleep(behavior.chunkDelayMs);
      if (response.destroyed) return;
      if (behavior.closeAfterChunks !== undefined && recorded.chunksSent >= behavior.closeAfterChunks) {
        response.socket?.destroy();
        return;
      }
      if (behavior.hangAfterChunks !== undefined && recorded.chunksSent >= behavior.hangAfterChunks) return;
      response.write(piece);
      recorded.chunksSent++;
      this.changed();
    }
    for (const event of events.closing) response.write(event);
    response.end(done ? 'data: [DONE]\n\n' : undefined);
    recorded.completed = true;
  }

  private usage(behavior: UpstreamBehavior, completion: number) {
    const prompt = behavior.promptTokens ?? 7;
    const usage: Json = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
    const details = behavior.usageDetails;
    if (details?.cached_tokens !== undefined) usage.prompt_tokens_details = { cached_tokens: details.cached_tokens, audio_tokens: 0 };
    if (details?.reasoning_tokens !== undefined) usage.completion_tokens_details = { reasoning_tokens: details.reasoning_tokens, audio_tokens: 0 };
    return usage;
  }

  private async chat(response: ServerResponse, recorded: UpstreamRequest, behavior: UpstreamBehavior): Promise<void> {
    const body = recorded.body;
    const last = (body.messages as Json[] | undefined)?.at(-1);
    const offered = Array.isArray(body.tools) && body.tools.length > 0;
    const toolCall = offered && last?.role !== 'tool' ? { id: `call_${++this.sequence}`, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } } : null;
    const pieces = last?.role === 'tool' ? words(WEATHER_ANSWER) : (behavior.chunks ?? DEFAULT_CHUNKS);
    const usage = this.usage(behavior, toolCall ? 6 : pieces.length);
    const base = { id: 'chatcmpl-fake123', object: 'chat.completion', created: 1_700_000_000, model: `served-${String(body.model)}` };
    const finish = toolCall ? 'tool_calls' : 'stop';
    if (body.stream !== true) {
      const message = toolCall ? { role: 'assistant', content: null, tool_calls: [toolCall] } : { role: 'assistant', content: pieces.join('') };
      this.send(response, recorded, behavior, 200, { ...base, choices: [{ index: 0, message, finish_reason: finish }], ...(behavior.usage === false ? {} : { usage }) });
      recorded.chunksSent = pieces.length;
      return;
    }
    const includeUsage = (body.stream_options as Json | undefined)?.include_usage === true && behavior.usage !== false;
    const chunk = (choices: unknown[], extra: Json = includeUsage ? { usage: null } : {}) => data({ ...base, object: 'chat.completion.chunk', choices, ...extra });
    const delta = (content: Json) => chunk([{ index: 0, delta: content, finish_reason: null }]);
    const contents = toolCall
      ? [
          delta({ tool_calls: [{ index: 0, ...toolCall, function: { name: 'get_weather', arguments: '' } }] }),
          ...['{"city":', '"Paris"}'].map((part) => delta({ tool_calls: [{ index: 0, function: { arguments: part } }] })),
        ]
      : pieces.map((piece) => delta({ content: piece }));
    const closing = [chunk([{ index: 0, delta: {}, finish_reason: finish }])];
    if (behavior.litellmUsage) closing.push(chunk([{ index: 0, delta: {} }], { usage }));
    else if (includeUsage) closing.push(chunk([], { usage }));
    await this.stream(response, recorded, behavior, { opening: [delta({ role: 'assistant', content: '' })], pieces: contents, closing }, true);
  }

  private async completion(response: ServerResponse, recorded: UpstreamRequest, behavior: UpstreamBehavior): Promise<void> {
    const body = recorded.body;
    const pieces = COMPLETION_PIECES;
    const usage = this.usage(behavior, pieces.length);
    const base = { id: `cmpl-${++this.sequence}`, object: 'text_completion', created: 1_700_000_000, model: `served-${String(body.model)}` };
    const choice = (text: string, finish: string | null) => ({ ...base, choices: [{ index: 0, text, finish_reason: finish, logprobs: null }] });
    if (body.stream !== true) return this.send(response, recorded, behavior, 200, { ...choice(pieces.join(''), 'stop'), usage });
    const includeUsage = (body.stream_options as Json | undefined)?.include_usage === true;
    const closing = [data(choice('', 'stop'))];
    if (includeUsage) closing.push(data({ ...base, choices: [], usage }));
    await this.stream(response, recorded, behavior, { opening: [], pieces: pieces.map((piece) => data(choice(piece, null))), closing }, true);
  }

  private embeddings(response: ServerResponse, recorded: UpstreamRequest, behavior: UpstreamBehavior): void {
    const body = recorded.body;
    const inputs = Array.isArray(body.input) ? body.input : [body.input];
    const embeddings = inputs.map((_input, index) => {
      const vector = [0.25, -0.5, index];
      const embedding = body.encoding_format === 'base64' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector;
      return { object: 'embedding', index, embedding };
    });
    const prompt = inputs.length * 4;
    this.send(response, recorded, behavior, 200, { object: 'list', data: embeddings, model: `served-${String(body.model)}`, usage: { prompt_tokens: prompt, total_tokens: prompt } });
  }

  private responseObject(body: Json, behavior: UpstreamBehavior, pieces: string[]): Json {
    const text = pieces.join('');
    const prompt = behavior.promptTokens ?? 7;
    return {
      id: `resp_${++this.sequence}fake`,
      object: 'response',
      created_at: 1_700_000_000,
      status: 'completed',
      error: null,
      incomplete_details: null,
      instructions: body.instructions ?? null,
      model: `served-${String(body.model)}`,
      output: [{ type: 'message', id: `msg_${this.sequence}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }],
      parallel_tool_calls: true,
      previous_response_id: body.previous_response_id ?? null,
      store: body.store !== false,
      temperature: 1,
      text: { format: { type: 'text' } },
      tool_choice: 'auto',
      tools: [],
      top_p: 1,
      usage: { input_tokens: prompt, input_tokens_details: { cached_tokens: 0 }, output_tokens: pieces.length, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: prompt + pieces.length },
      metadata: {},
    };
  }

  private async createResponse(response: ServerResponse, recorded: UpstreamRequest, behavior: UpstreamBehavior): Promise<void> {
    const body = recorded.body;
    const previous = typeof body.previous_response_id === 'string' ? this.stored.get(body.previous_response_id) : undefined;
    if (body.previous_response_id && !previous) {
      const message = `Previous response with id '${String(body.previous_response_id)}' not found.`;
      return this.send(response, recorded, behavior, 404, { error: { message, type: 'invalid_request_error', param: 'previous_response_id', code: 'previous_response_not_found' } });
    }
    const pieces = previous ? words(CONTINUED_ANSWER) : (behavior.chunks ?? DEFAULT_CHUNKS);
    const text = pieces.join('');
    const done = this.responseObject(body, behavior, pieces);
    if (body.store !== false) this.stored.set(String(done.id), done);
    if (body.stream !== true) return this.send(response, recorded, behavior, 200, done);
    const started = { ...done, status: 'in_progress', output: [], usage: null };
    const item = (done.output as Json[])[0]!;
    const part = { item_id: item.id, output_index: 0, content_index: 0 };
    let sequence = 0;
    const event = (type: string, fields: Json) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...fields })}\n\n`;
    const opening = [
      event('response.created', { response: started }),
      event('response.in_progress', { response: started }),
      event('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } }),
      event('response.content_part.added', { ...part, part: { type: 'output_text', text: '', annotations: [] } }),
    ];
    const deltas = pieces.map((piece) => event('response.output_text.delta', { ...part, delta: piece, logprobs: [] }));
    const closing = [
      event('response.output_text.done', { ...part, text, logprobs: [] }),
      event('response.content_part.done', { ...part, part: { type: 'output_text', text, annotations: [] } }),
      event('response.output_item.done', { output_index: 0, item }),
      event('response.completed', { response: done }),
    ];
    await this.stream(response, recorded, behavior, { opening, pieces: deltas, closing }, false);
  }

  private storedResponse(response: ServerResponse, recorded: UpstreamRequest, behavior: UpstreamBehavior, id: string, inputItems: boolean): void {
    const stored = this.stored.get(id);
    if (!stored) return this.send(response, recorded, behavior, 404, { error: { message: `Response with id '${id}' not found.`, type: 'invalid_request_error', code: null } });
    if (recorded.method === 'DELETE') {
      this.stored.delete(id);
      return this.send(response, recorded, behavior, 200, { id, object: 'response.deleted', deleted: true });
    }
    if (inputItems) return this.send(response, recorded, behavior, 200, { object: 'list', data: [], first_id: null, last_id: null, has_more: false });
    this.send(response, recorded, behavior, 200, stored);
  }
}

/** Just enough multipart parsing to see the fields and the file size the gateway forwarded. */
function parseMultipart(raw: Buffer, contentType: string): UpstreamRequest['multipart'] {
  const boundary = /boundary=("?)([^";]+)\1/.exec(contentType)?.[2];
  if (!boundary) return null;
  const fields: Record<string, string> = {};
  let fileName: string | null = null;
  let fileBytes = 0;
  const text = raw.toString('latin1');
  for (const part of text.split(`--${boundary}`).slice(1, -1)) {
    const [head, ...rest] = part.split('\r\n\r\n');
    const content = rest.join('\r\n\r\n').replace(/\r\n$/, '');
    const name = /name="([^"]+)"/.exec(head ?? '')?.[1];
    const file = /filename="([^"]*)"/.exec(head ?? '')?.[1];
    if (!name) continue;
    if (file !== undefined) {
      fileName = file;
      fileBytes = Buffer.byteLength(content, 'latin1');
    } else {
      fields[name] = content;
    }
  }
  return { fields, fileName, fileBytes };
}
