import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseJson, readBody, readTarget, ScenarioLoopbackServer } from './loopback-server.js';
import { PLAIN_ANSWER, WEATHER_ANSWER, words } from './loopback-upstream.js';

/**
 * The tests' native Messages backend on a loopback port: what Anthropic's API, vLLM, llama.cpp
 * server or Ollama serve at `/v1/messages` (DESIGN section 8, `api: anthropic`). A base URL names a
 * scenario (`/<scenario>/v1`), as in loopback-upstream.ts, so one server serves many. Below `/v1`:
 * `POST /messages` (JSON, or SSE in Anthropic's event order: message_start with the input and cache
 * usage, an optional ping, content_block_start / _delta / _stop per block, message_delta with the
 * stop reason and output tokens, message_stop) and `POST /messages/count_tokens`. Offered a
 * `get_weather` tool with no tool_result yet, it calls the tool (streamed as input_json_delta);
 * given the result, it answers from it. It names the model as the request named it (as Anthropic
 * does), answers errors in Anthropic's shape and records every request.
 */
export interface MessagesBehavior {
  /** HTTP status; non-2xx answers carry `errorBody` (default Anthropic's error shape for the status). */
  status?: number;
  /** With a non-2xx `status`: only the scenario's first this many requests get it, later ones are answered (a retry succeeds). */
  statusTimes?: number;
  errorBody?: unknown;
  headers?: Record<string, string>;
  /** Wait before the response headers. */
  latencyMs?: number;
  /** Never answer (keeps the connection open). */
  hang?: boolean;
  /** The text answer, one piece a text_delta and an output token (default: PLAIN_ANSWER in words). */
  text?: string[];
  /** A thinking block before the text, one piece a thinking_delta. */
  thinking?: string[];
  /** usage.input_tokens (default 11): the uncached input, as Anthropic reports it. */
  inputTokens?: number;
  /** usage.cache_read_input_tokens (default 0). */
  cacheReadTokens?: number;
  /** usage.cache_creation_input_tokens (default 0). */
  cacheWriteTokens?: number;
  /** usage.output_tokens; default: one a piece sent (a tool call counts 6). */
  outputTokens?: number;
  /** count_tokens' answer (default: inputTokens + cacheReadTokens + cacheWriteTokens). */
  countTokens?: number;
  /** Streams: wait between content deltas. */
  chunkDelayMs?: number;
  /** Streams: send a ping after message_start (default true, as Anthropic does). */
  ping?: boolean;
  /**
   * Streams: after `afterDeltas` content deltas, break: cut the connection ('cut'), send bytes that
   * are not an event and end ('garbage'), send nothing more but keep the connection ('stall'), or
   * send Anthropic's own mid-stream `error` event (overloaded) and end ('error').
   */
  broken?: { afterDeltas: number; how: 'cut' | 'garbage' | 'stall' | 'error' };
  /**
   * Refuse a `messages` role other than user/assistant with Anthropic's own 400 (`messages.1.role:
   * Input should be 'user' or 'assistant'`), as backends without mid-conversation system messages
   * do; Claude Code then sends its request again without that message.
   */
  strictRoles?: boolean;
}

export interface MessagesRequest {
  scenario: string;
  method: string;
  /** The request target as the server saw it, query included: `/<scenario>/v1/messages?beta=true`. */
  path: string;
  /** The route below `/v1`, without the query: `/messages`, `/messages/count_tokens`. */
  route: string;
  /** The query string's parameters. */
  query: Record<string, string>;
  headers: IncomingMessage['headers'];
  /** The JSON body parsed; {} for none, another type or one that does not parse. */
  body: Record<string, unknown>;
  /** Date.now() when the request arrived (retry tests measure the gaps). */
  receivedAt: number;
  /** The client side closed the connection before the response was complete. */
  aborted: boolean;
  completed: boolean;
  /** The response is over: sent whole, or its connection closed. */
  closed: boolean;
  /** Content deltas written (text, thinking, input_json) before the end or the break. */
  deltasSent: number;
  /** The usage this server reported (or, for a stream that broke, would have): what a test expects charged. */
  usage: { input_tokens: number; cache_read_input_tokens: number; cache_creation_input_tokens: number; output_tokens: number } | null;
}

type Json = Record<string, unknown>;

export const TOOL_NAME = 'get_weather';
/** The tool call's input, streamed in these two input_json_delta pieces. */
export const TOOL_INPUT = { city: 'Paris' };
const TOOL_INPUT_PIECES = ['{"city":', '"Paris"}'];
/** What a tool call counts as output tokens. */
export const TOOL_CALL_TOKENS = 6;
export { PLAIN_ANSWER, WEATHER_ANSWER };

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

/** Anthropic's error body for a status. */
export function anthropicError(status: number, message = `fake messages upstream says ${status}`): Json {
  return { type: 'error', error: { type: ERROR_TYPES[status] ?? 'api_error', message }, request_id: `req_fake${status}` };
}

/** One SSE event as Anthropic writes it: an `event:` line naming the `type` of its data. */
const event = (data: Json) => `event: ${String(data.type)}\ndata: ${JSON.stringify(data)}\n\n`;

/** A content block of the reply and its deltas, as streamed. */
interface Block {
  start: Json;
  deltas: Json[];
  /** The block as a whole, for JSON replies. */
  whole: Json;
}

export class MessagesUpstream extends ScenarioLoopbackServer<MessagesBehavior, MessagesRequest> {
  private sequence = 0;

  private constructor() {
    super('messages upstream');
  }

  static async start(behaviors: Record<string, MessagesBehavior> = {}): Promise<MessagesUpstream> {
    return new MessagesUpstream().listen(behaviors);
  }

  /** The origin, for clients (Claude Code's ANTHROPIC_BASE_URL) that append `/v1/messages` themselves. */
  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  protected async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const raw = await readBody(request);
    const { path, scenario, route, query } = readTarget(request);
    const recorded: MessagesRequest = {
      scenario,
      method: request.method ?? 'GET',
      path,
      route,
      query,
      headers: request.headers,
      body: parseJson(raw.toString('utf8')),
      receivedAt: Date.now(),
      aborted: false,
      completed: false,
      closed: false,
      deltasSent: 0,
      usage: null,
    };
    this.record(recorded, response);

    const behavior = this.behaviors.get(recorded.scenario) ?? {};
    if (behavior.hang) return;
    if (behavior.latencyMs) await sleep(behavior.latencyMs);
    if (response.destroyed) return;
    const failing = behavior.statusTimes === undefined || this.requestsOf(recorded.scenario).length <= behavior.statusTimes;
    const status = failing ? (behavior.status ?? 200) : 200;
    if (status < 200 || status >= 300) return this.send(response, recorded, behavior, status, behavior.errorBody ?? anthropicError(status));
    if (behavior.strictRoles && recorded.method === 'POST' && recorded.route.startsWith('/messages')) {
      const messages = Array.isArray(recorded.body.messages) ? (recorded.body.messages as Json[]) : [];
      const index = messages.findIndex((message) => message?.role !== 'user' && message?.role !== 'assistant');
      if (index >= 0) return this.send(response, recorded, behavior, 400, anthropicError(400, `messages.${index}.role: Input should be 'user' or 'assistant'`));
    }
    if (recorded.method === 'POST' && recorded.route === '/messages') return this.messages(response, recorded, behavior);
    if (recorded.method === 'POST' && recorded.route === '/messages/count_tokens') {
      const count = behavior.countTokens ?? (behavior.inputTokens ?? 11) + (behavior.cacheReadTokens ?? 0) + (behavior.cacheWriteTokens ?? 0);
      return this.send(response, recorded, behavior, 200, { input_tokens: count });
    }
    this.send(response, recorded, behavior, 404, anthropicError(404, `no route ${recorded.method} ${recorded.route}`));
  }

  private send(response: ServerResponse, recorded: MessagesRequest, behavior: MessagesBehavior, status: number, body: unknown): void {
    response.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_fake${++this.sequence}`, ...behavior.headers });
    response.end(JSON.stringify(body));
    recorded.completed = true;
  }

  /** The reply's blocks: a tool call when `get_weather` is offered and not answered yet, else thinking (if any) and text. */
  private blocksOf(body: Json, behavior: MessagesBehavior): { blocks: Block[]; stopReason: string; pieces: number } {
    const messages = Array.isArray(body.messages) ? (body.messages as Json[]) : [];
    const last = messages.at(-1);
    const answered = Array.isArray(last?.content) && (last.content as Json[]).some((block) => block?.type === 'tool_result');
    const offered = Array.isArray(body.tools) && (body.tools as Json[]).some((tool) => tool?.name === TOOL_NAME);
    if (offered && !answered) {
      const tool = { type: 'tool_use', id: `toolu_fake${++this.sequence}`, name: TOOL_NAME };
      return {
        blocks: [
          {
            start: { ...tool, input: {} },
            deltas: TOOL_INPUT_PIECES.map((partial_json) => ({ type: 'input_json_delta', partial_json })),
            whole: { ...tool, input: TOOL_INPUT },
          },
        ],
        stopReason: 'tool_use',
        pieces: TOOL_CALL_TOKENS,
      };
    }
    // Honours max_tokens as a backend does: at most that many pieces, then stop_reason max_tokens.
    const bound = typeof body.max_tokens === 'number' ? body.max_tokens : Infinity;
    const all = answered ? words(WEATHER_ANSWER) : (behavior.text ?? words(PLAIN_ANSWER));
    const text = all.slice(0, bound);
    const blocks: Block[] = [];
    if (behavior.thinking) {
      const thinking = behavior.thinking.join('');
      blocks.push({
        start: { type: 'thinking', thinking: '', signature: '' },
        deltas: [...behavior.thinking.map((piece) => ({ type: 'thinking_delta', thinking: piece })), { type: 'signature_delta', signature: 'c2lnbmF0dXJl' }],
        whole: { type: 'thinking', thinking, signature: 'c2lnbmF0dXJl' },
      });
    }
    blocks.push({
      start: { type: 'text', text: '' },
      deltas: text.map((piece) => ({ type: 'text_delta', text: piece })),
      whole: { type: 'text', text: text.join('') },
    });
    const pieces = text.length + (behavior.thinking?.length ?? 0);
    return { blocks, stopReason: text.length < all.length ? 'max_tokens' : 'end_turn', pieces };
  }

  private async messages(response: ServerResponse, recorded: MessagesRequest, behavior: MessagesBehavior): Promise<void> {
    const body = recorded.body;
    const { blocks, stopReason, pieces } = this.blocksOf(body, behavior);
    const usage = {
      input_tokens: behavior.inputTokens ?? 11,
      cache_creation_input_tokens: behavior.cacheWriteTokens ?? 0,
      cache_read_input_tokens: behavior.cacheReadTokens ?? 0,
      output_tokens: behavior.outputTokens ?? pieces,
    };
    recorded.usage = usage;
    const message = {
      id: `msg_fake${++this.sequence}`,
      type: 'message',
      role: 'assistant',
      model: body.model,
      content: [] as Json[],
      stop_reason: null as string | null,
      stop_sequence: null,
      usage: { ...usage, output_tokens: 1 },
    };
    if (body.stream !== true) {
      recorded.deltasSent = blocks.reduce((sum, block) => sum + block.deltas.length, 0);
      return this.send(response, recorded, behavior, 200, { ...message, content: blocks.map((block) => block.whole), stop_reason: stopReason, usage });
    }

    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'request-id': `req_fake${this.sequence}`, ...behavior.headers });
    response.write(event({ type: 'message_start', message }));
    if (behavior.ping ?? true) response.write(event({ type: 'ping' }));
    const broken = behavior.broken;
    for (const [index, block] of blocks.entries()) {
      response.write(event({ type: 'content_block_start', index, content_block: block.start }));
      for (const delta of block.deltas) {
        if (behavior.chunkDelayMs) await sleep(behavior.chunkDelayMs);
        if (response.destroyed) return;
        if (broken && recorded.deltasSent >= broken.afterDeltas) return this.breakOff(response, broken.how);
        response.write(event({ type: 'content_block_delta', index, delta }));
        recorded.deltasSent++;
        this.changed();
      }
      response.write(event({ type: 'content_block_stop', index }));
    }
    if (broken && recorded.deltasSent >= broken.afterDeltas) return this.breakOff(response, broken.how);
    response.write(event({ type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } }));
    response.end(event({ type: 'message_stop' }));
    recorded.completed = true;
  }

  private breakOff(response: ServerResponse, how: NonNullable<MessagesBehavior['broken']>['how']): void {
    switch (how) {
      case 'cut':
        // Written first, then cut: what was sent reaches the gateway before the connection resets.
        response.write('', () => setTimeout(() => response.socket?.destroy(), 20));
        return;
      case 'garbage':
        response.end('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_\n\n\u0000\u00ff not an event\n\n');
        return;
      case 'stall':
        return;
      case 'error':
        response.end(event({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
        return;
    }
  }
}
