import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { LoopbackServer, parseJson, readBody, readTarget } from './loopback-server.js';

/**
 * An OpenAI-compatible backend on a loopback port that charges the way vLLM does, for the tests of
 * what a request may cost (issue 29, docs/limits-and-usage.md "Charges that hold"):
 *
 * - **Output.** It honours the LARGEST of `max_tokens`, `max_completion_tokens` and
 *   `max_output_tokens` (vLLM and SGLang honour `max_completion_tokens` over `max_tokens`), for each
 *   of `n` choices (`best_of` sequences on completions). A request that names none gets
 *   `defaultOutputTokens` (6,000: more than the gateway's default bound of 4,096) per choice. One
 *   output token is one short word piece (`tok `).
 * - **Prompt.** An honest tokenizer proxy over everything it reads (messages, system, tools and
 *   functions with their JSON schemas, response_format, input, instructions, text, prompt, suffix,
 *   and a previous response's tokens): per string, its ASCII characters / 4 rounded up plus one
 *   token per other code point (CJK is about a token a character). Keys count inside schemas. It
 *   never reports more tokens than the UTF-8 bytes of those fields.
 * - **Served tokens.** Every request is recorded with what it really did: the prompt it read and
 *   the output it generated, including for a call whose connection closed early (what was
 *   generated before the close). Its usage report (honest unless a scenario says otherwise) is
 *   recorded beside it.
 *
 * A base URL names a scenario (`/<scenario>/v1`): pacing, and the usage it reports. Routes below
 * `/v1`: POST `/chat/completions`, `/completions`, `/responses` (JSON and SSE; `stream_options.
 * include_usage` adds a final usage chunk), GET and DELETE `/responses/{id}`. `background: true` on
 * `/responses` answers `queued` with an id; GET answers `in_progress` until `backgroundMs` have
 * passed, then `completed` with the full usage (the work is served, and recorded, at creation).
 */
export type UsageReport =
  /** The true counts. */
  | 'honest'
  /** No usage object (and no usage chunk in a stream, even when asked). */
  | 'omit'
  /** completion_tokens / output_tokens negative. */
  | 'negative'
  /** completion_tokens / output_tokens written `1e999`: valid JSON that parses to Infinity (a NaN-like count). */
  | 'non-finite'
  /** completion_tokens / output_tokens a string (`"1000 tokens"`). */
  | 'string';

export interface VllmScenario {
  /** Generation pace: milliseconds per output token (choices generate in parallel). 0: all at once. */
  msPerToken?: number;
  /** Streams: output tokens per content chunk (per choice). Default 16. */
  tokensPerChunk?: number;
  /** What the usage report says. Default 'honest'. */
  usage?: UsageReport;
  /** Output per choice of a request that names no max field. Default 6000. */
  defaultOutputTokens?: number;
  /** Background responses: milliseconds from creation until completed. Default 1500. */
  backgroundMs?: number;
}

export interface ServedRequest {
  scenario: string;
  method: string;
  /** The route below `/v1`, without the query: `/chat/completions`. */
  route: string;
  /** The body as received (for filtering by a test's tag). */
  raw: string;
  body: Record<string, unknown>;
  /** What it read: the honest prompt tokens. */
  promptTokens: number;
  /** The largest max field the request named (undefined: none). */
  maxField: number | undefined;
  /** Output sequences: n (or best_of), at least 1. */
  sequences: number;
  /** The output it was going to produce (per choice x sequences). */
  plannedOutputTokens: number;
  /** The output it produced: all of it, or what was generated before the connection closed. */
  generatedTokens: number;
  /** The usage text it sent (a JSON fragment), null when none was sent (yet). */
  reported: string | null;
  /** A background response: created queued; its work is served (and counted here) at creation. */
  background: boolean;
  /** The response id it minted (Responses API). */
  responseId: string | null;
  /** The connection closed before the reply was complete. */
  aborted: boolean;
  /** The reply is over (sent whole, or its connection closed). */
  closed: boolean;
}

type Json = Record<string, unknown>;

interface StoredResponse {
  id: string;
  body: Json;
  promptTokens: number;
  outputTokens: number;
  createdAt: number;
  background: boolean;
  scenario: string;
}

const PIECE = 'tok ';
const DEFAULT_OUTPUT_TOKENS = 6000;
const USAGE_PLACEHOLDER = '"__vllm_like_usage__"';
const MAX_FIELDS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'] as const;
/** Fields that are JSON schemas (or carry them): their keys are read as text too. */
const SCHEMA_FIELDS = new Set(['tools', 'functions', 'response_format', 'text']);
const PROMPT_FIELDS: Record<string, string[]> = {
  '/chat/completions': ['messages', 'system', 'tools', 'functions', 'response_format'],
  '/completions': ['prompt', 'suffix', 'system'],
  '/responses': ['input', 'instructions', 'system', 'tools', 'text'],
};

/** Honest tokens of one string: ASCII characters / 4 rounded up, plus one per other code point. Never more than its UTF-8 bytes. */
export function tokensOfText(text: string): number {
  let ascii = 0;
  let other = 0;
  for (const char of text) {
    if (char.charCodeAt(0) < 0x80) ascii++;
    else other++;
  }
  return Math.ceil(ascii / 4) + other;
}

/** Honest tokens of a JSON value: its strings (and, in a schema, its keys), each counted by tokensOfText. */
export function tokensOfValue(value: unknown, countKeys: boolean): number {
  if (typeof value === 'string') return tokensOfText(value);
  if (value === null || typeof value !== 'object') return 0;
  let tokens = 0;
  if (Array.isArray(value)) {
    for (const item of value) tokens += tokensOfValue(item, countKeys);
    return tokens;
  }
  for (const [key, item] of Object.entries(value)) tokens += (countKeys ? tokensOfText(key) : 0) + tokensOfValue(item, countKeys);
  return tokens;
}

const positiveInteger = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;

export class VllmLikeUpstream extends LoopbackServer<VllmScenario, ServedRequest> {
  private readonly stored = new Map<string, StoredResponse>();
  private sequence = 0;

  private constructor() {
    super();
  }

  static async start(scenarios: Record<string, VllmScenario> = {}): Promise<VllmLikeUpstream> {
    return new VllmLikeUpstream().listen(scenarios);
  }

  /** The requests whose body contains `tag` (a test marks its requests with its own tag). */
  requestsTagged(tag: string): ServedRequest[] {
    return this.requests.filter((request) => request.raw.includes(tag));
  }

  /** Tokens served: what the requests read plus what they generated (by this backend's own record). */
  served(requests: ServedRequest[]): number {
    return requests.reduce((sum, request) => sum + request.promptTokens + request.generatedTokens, 0);
  }

  servedTagged(tag: string): number {
    return this.served(this.requestsTagged(tag));
  }

  /** Resolves when every request tagged `tag` has ended (replied whole or cut off), so its served tokens are final. */
  async waitIdle(tag: string, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.requestsTagged(tag).some((request) => !request.closed)) {
      if (Date.now() > deadline) throw new Error(`vllm-like upstream: requests tagged ${tag} still open after ${timeoutMs} ms`);
      await sleep(20);
    }
  }

  /** GET polls of a stored response so far. */
  pollsOf(responseId: string): number {
    return this.requests.filter((request) => request.method === 'GET' && request.route === `/responses/${responseId}`).length;
  }

  /** A request that fails here loses its connection, as a crashed backend's would. */
  protected handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    return this.serve(request, response).catch(() => {
      response.destroy();
    });
  }

  private async serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const raw = (await readBody(request)).toString('utf8');
    const { scenario: scenarioName, route } = readTarget(request);
    const scenario = this.behaviors.get(scenarioName) ?? {};
    const body = parseJson(raw);
    const method = request.method ?? 'GET';
    const previous = typeof body.previous_response_id === 'string' ? this.stored.get(body.previous_response_id) : undefined;
    const maxField = method === 'POST' ? largestMaxField(body) : undefined;
    const sequences = route === '/responses' ? 1 : Math.max(1, ...[body.n, body.best_of].filter(positiveInteger));
    const perChoice = maxField ?? scenario.defaultOutputTokens ?? DEFAULT_OUTPUT_TOKENS;
    const fields = PROMPT_FIELDS[route];
    const promptTokens =
      method === 'POST' && fields
        ? fields.reduce((sum, field) => sum + tokensOfValue(body[field], SCHEMA_FIELDS.has(field)), 0) + (previous ? previous.promptTokens + previous.outputTokens : 0)
        : 0;
    const recorded: ServedRequest = {
      scenario: scenarioName,
      method,
      route,
      raw,
      body,
      promptTokens,
      maxField,
      sequences,
      plannedOutputTokens: fields && method === 'POST' ? perChoice * sequences : 0,
      generatedTokens: 0,
      reported: null,
      background: false,
      responseId: null,
      aborted: false,
      closed: false,
    };
    this.record(recorded, response);
    // After record's own listener: by the time this resolves the request is marked closed.
    const gone = new Promise<void>((resolve) => response.once('close', () => resolve()));

    const stored = /^\/responses\/([^/]+)$/.exec(route);
    if (stored) return this.storedResponse(response, recorded, scenario, decodeURIComponent(stored[1]!));
    if (method !== 'POST' || !fields) return sendJson(response, 404, { error: { message: `no route ${method} ${route}`, type: 'invalid_request_error' } });
    if (typeof body.previous_response_id === 'string' && !previous) {
      return sendJson(response, 404, { error: { message: `Previous response with id '${body.previous_response_id}' not found.`, type: 'invalid_request_error' } });
    }
    if (route === '/responses' && body.background === true) return this.background(response, recorded, scenario);
    if (body.stream === true) return this.stream(response, recorded, scenario, perChoice, gone);
    return this.json(response, recorded, scenario, perChoice, gone);
  }

  /** A JSON reply, sent once the whole output is generated (paced by msPerToken); a connection closed before is charged what was generated. */
  private async json(response: ServerResponse, recorded: ServedRequest, scenario: VllmScenario, perChoice: number, gone: Promise<void>): Promise<void> {
    const msPerToken = scenario.msPerToken ?? 0;
    if (msPerToken > 0) {
      const startedAt = Date.now();
      await Promise.race([sleep(perChoice * msPerToken), gone]);
      if (response.destroyed || recorded.closed) {
        // Cut off while generating: what was generated until then was served.
        recorded.generatedTokens = Math.min(perChoice, Math.floor((Date.now() - startedAt) / msPerToken)) * recorded.sequences;
        return;
      }
    }
    recorded.generatedTokens = recorded.plannedOutputTokens;
    const usage = usageText(scenario.usage ?? 'honest', recorded.route === '/responses' ? 'responses' : 'chat', recorded.promptTokens, recorded.plannedOutputTokens);
    recorded.reported = usage;
    const text = PIECE.repeat(perChoice);
    const model = String(recorded.body.model);
    let reply: Json;
    if (recorded.route === '/chat/completions') {
      const choices = Array.from({ length: recorded.sequences }, (_, index) => ({ index, message: { role: 'assistant', content: text }, finish_reason: 'length' }));
      reply = { id: `chatcmpl-${++this.sequence}`, object: 'chat.completion', created: 1_700_000_000, model, choices };
    } else if (recorded.route === '/completions') {
      const choices = Array.from({ length: recorded.sequences }, (_, index) => ({ index, text, finish_reason: 'length', logprobs: null }));
      reply = { id: `cmpl-${++this.sequence}`, object: 'text_completion', created: 1_700_000_000, model, choices };
    } else {
      const stored = this.remember(recorded, perChoice, false);
      reply = responseObject(stored, 'completed', text);
    }
    if (usage !== null) reply.usage = '__vllm_like_usage__';
    const json = JSON.stringify(reply).replace(USAGE_PLACEHOLDER, usage ?? 'null');
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
    response.end(json);
  }

  /** An event stream: a chunk per `tokensPerChunk` tokens of each choice, paced; a usage chunk at the end when asked (chat, completions) or in `response.completed`. */
  private async stream(response: ServerResponse, recorded: ServedRequest, scenario: VllmScenario, perChoice: number, gone: Promise<void>): Promise<void> {
    const route = recorded.route;
    const model = String(recorded.body.model);
    const id = `${route === '/completions' ? 'cmpl' : 'chatcmpl'}-${++this.sequence}`;
    const perChunk = Math.max(1, scenario.tokensPerChunk ?? 16);
    const msPerToken = scenario.msPerToken ?? 0;
    const asked = (recorded.body.stream_options as Json | undefined)?.include_usage === true;
    const usageStyle = route === '/responses' ? 'responses' : 'chat';
    const stored = route === '/responses' ? this.remember(recorded, perChoice, false) : null;
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const data = (event: unknown) => `data: ${JSON.stringify(event)}\n\n`;
    let sequenceNumber = 0;
    const event = (type: string, fields: Json) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequenceNumber++, ...fields })}\n\n`;
    const chatChunk = (choices: unknown[]) => data({ id, object: 'chat.completion.chunk', created: 1_700_000_000, model, choices, ...(asked ? { usage: null } : {}) });
    const write = async (text: string): Promise<boolean> => {
      if (response.destroyed || recorded.closed) return false;
      if (!response.write(text)) await Promise.race([new Promise((resolve) => response.once('drain', resolve)), gone]);
      return !response.destroyed && !recorded.closed;
    };

    if (route === '/chat/completions') await write(chatChunk(Array.from({ length: recorded.sequences }, (_, index) => ({ index, delta: { role: 'assistant', content: '' }, finish_reason: null }))));
    if (stored) await write(event('response.created', { response: responseObject(stored, 'in_progress', '') }));
    for (let done = 0; done < perChoice; ) {
      const step = Math.min(perChunk, perChoice - done);
      if (msPerToken > 0) await Promise.race([sleep(step * msPerToken), gone]);
      const piece = PIECE.repeat(step);
      let text = '';
      for (let index = 0; index < recorded.sequences; index++) {
        if (route === '/chat/completions') text += chatChunk([{ index, delta: { content: piece }, finish_reason: null }]);
        else if (route === '/completions') text += data({ id, object: 'text_completion', created: 1_700_000_000, model, choices: [{ index, text: piece, finish_reason: null, logprobs: null }] });
        else text += event('response.output_text.delta', { item_id: `msg_${stored!.id}`, output_index: 0, content_index: 0, delta: piece });
      }
      if (response.destroyed || recorded.closed) return;
      // Generated once it is written: a connection that closes afterwards has had this work done.
      recorded.generatedTokens += step * recorded.sequences;
      done += step;
      if (!(await write(text))) return;
    }
    const usage = usageText(scenario.usage ?? 'honest', usageStyle, recorded.promptTokens, recorded.plannedOutputTokens);
    if (route === '/responses') {
      recorded.reported = usage;
      const completed = responseObject(stored!, 'completed', PIECE.repeat(perChoice));
      completed.usage = '__vllm_like_usage__';
      const json = JSON.stringify({ type: 'response.completed', sequence_number: sequenceNumber++, response: completed }).replace(USAGE_PLACEHOLDER, usage ?? 'null');
      if (!(await write(`event: response.completed\ndata: ${json}\n\n`))) return;
      response.end();
      return;
    }
    const finish = Array.from({ length: recorded.sequences }, (_, index) =>
      route === '/chat/completions' ? chatChunk([{ index, delta: {}, finish_reason: 'length' }]) : data({ id, object: 'text_completion', created: 1_700_000_000, model, choices: [{ index, text: '', finish_reason: 'length', logprobs: null }] }),
    ).join('');
    if (!(await write(finish))) return;
    if (asked && usage !== null) {
      recorded.reported = usage;
      const object = route === '/chat/completions' ? 'chat.completion.chunk' : 'text_completion';
      const chunk = JSON.stringify({ id, object, created: 1_700_000_000, model, choices: [], usage: '__vllm_like_usage__' }).replace(USAGE_PLACEHOLDER, usage);
      if (!(await write(`data: ${chunk}\n\n`))) return;
    }
    response.end('data: [DONE]\n\n');
  }

  /** `background: true`: queued at once; the work is done (and recorded as served) now, GET shows it completed after backgroundMs. */
  private background(response: ServerResponse, recorded: ServedRequest, scenario: VllmScenario): void {
    const perChoice = recorded.maxField ?? scenario.defaultOutputTokens ?? DEFAULT_OUTPUT_TOKENS;
    const stored = this.remember(recorded, perChoice, true);
    recorded.background = true;
    recorded.generatedTokens = recorded.plannedOutputTokens;
    sendJson(response, 200, responseObject(stored, 'queued', ''));
  }

  private storedResponse(response: ServerResponse, recorded: ServedRequest, scenario: VllmScenario, id: string): void {
    const stored = this.stored.get(id);
    if (!stored) return sendJson(response, 404, { error: { message: `Response with id '${id}' not found.`, type: 'invalid_request_error', code: null } });
    recorded.responseId = id;
    if (recorded.method === 'DELETE') {
      this.stored.delete(id);
      return sendJson(response, 200, { id, object: 'response', deleted: true });
    }
    if (recorded.method !== 'GET') return sendJson(response, 404, { error: { message: 'not supported', type: 'invalid_request_error' } });
    const backgroundMs = this.behaviors.get(stored.scenario)?.backgroundMs ?? 1500;
    if (stored.background && Date.now() - stored.createdAt < backgroundMs) {
      const polls = this.pollsOf(id);
      return sendJson(response, 200, responseObject(stored, polls <= 1 ? 'queued' : 'in_progress', ''));
    }
    const usage = usageText(scenario.usage ?? 'honest', 'responses', stored.promptTokens, stored.outputTokens);
    recorded.reported = usage;
    const object = responseObject(stored, 'completed', PIECE.repeat(stored.outputTokens));
    if (usage !== null) object.usage = '__vllm_like_usage__';
    const json = JSON.stringify(object).replace(USAGE_PLACEHOLDER, usage ?? 'null');
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
    response.end(json);
  }

  private remember(recorded: ServedRequest, perChoice: number, background: boolean): StoredResponse {
    const stored: StoredResponse = {
      id: `resp_${++this.sequence}vllm`,
      body: recorded.body,
      promptTokens: recorded.promptTokens,
      outputTokens: perChoice,
      createdAt: Date.now(),
      background,
      scenario: recorded.scenario,
    };
    recorded.responseId = stored.id;
    if (recorded.body.store !== false || background) this.stored.set(stored.id, stored);
    return stored;
  }
}

function largestMaxField(body: Json): number | undefined {
  let largest: number | undefined;
  for (const field of MAX_FIELDS) {
    const value = body[field];
    if (positiveInteger(value) && (largest === undefined || value > largest)) largest = value;
  }
  return largest;
}

/** The usage object as JSON text (so a non-finite count can be written), or null when none is reported. */
function usageText(report: UsageReport, style: 'chat' | 'responses', prompt: number, completion: number): string | null {
  if (report === 'omit') return null;
  const output: string =
    report === 'negative' ? String(-completion) : report === 'non-finite' ? '1e999' : report === 'string' ? JSON.stringify(`${completion} tokens`) : String(completion);
  const total: string = report === 'honest' ? String(prompt + completion) : report === 'negative' ? String(prompt - completion) : output;
  return style === 'chat'
    ? `{"prompt_tokens":${prompt},"completion_tokens":${output},"total_tokens":${total}}`
    : `{"input_tokens":${prompt},"input_tokens_details":{"cached_tokens":0},"output_tokens":${output},"output_tokens_details":{"reasoning_tokens":0},"total_tokens":${total}}`;
}

function responseObject(stored: StoredResponse, status: 'queued' | 'in_progress' | 'completed', text: string): Json {
  const output = status === 'completed' ? [{ type: 'message', id: `msg_${stored.id}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] }] : [];
  return {
    id: stored.id,
    object: 'response',
    created_at: Math.floor(stored.createdAt / 1000),
    status,
    background: stored.background,
    error: null,
    incomplete_details: null,
    instructions: stored.body.instructions ?? null,
    max_output_tokens: stored.body.max_output_tokens ?? null,
    model: String(stored.body.model),
    output,
    previous_response_id: stored.body.previous_response_id ?? null,
    store: stored.body.store !== false,
    text: { format: { type: 'text' } },
    usage: null,
    metadata: {},
  };
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
  response.end(json);
}
