/** The `models[].endpoints` names: which model routes a model may serve. */
export const MODEL_ENDPOINTS = ['chat', 'completions', 'embeddings', 'responses', 'images', 'audio', 'fine_tuning', 'messages'] as const;
export type ModelEndpointName = (typeof MODEL_ENDPOINTS)[number];
import { ByteToken } from './json-bytes.js';

/** The model routes the gateway proxies (OpenAI's, and Anthropic's Messages), and what differs between them. */
export type OperationName = 'chat' | 'completions' | 'embeddings' | 'responses' | 'messages' | 'count_tokens';

/** Every kind of model work a route can create: the token operations, and the resource creations. */
export type ModelWork = OperationName | 'images' | 'audio_speech' | 'audio_transcriptions' | 'fine_tuning';

export interface Operation {
  name: OperationName;
  /** The `models[].endpoints` entry that lets a model serve it. */
  endpoint: ModelEndpointName;
  /** Path below the target's base URL. */
  path: string;
  /** `gen_ai.operation.name` of the OpenTelemetry conventions. */
  metricName: string;
  /** Answers `stream: true` with server-sent events. */
  streams: boolean;
  /** Streams carry usage only when asked with `stream_options.include_usage` (the gateway always asks). */
  asksStreamUsage: boolean;
  /** Keys of stream events whose non-empty string value is delivered output (metered if the stream ends early). */
  outputKeys: ByteToken[];
  /** Markers of the event that completes a stream (`[DONE]`, or the Responses and Messages APIs' terminal events). */
  terminalMarkers: ByteToken[];
  /** The stream ends with a named event (terminalMarkers) rather than `data: [DONE]`. */
  endsWithNamedEvent: boolean;
  /** Markers of stream events whose usage is only a first part (merged, not yet charged): Messages' message_start. */
  partialUsageMarkers?: ByteToken[];
  /** The tokens of the upstream's usage object (a stream's usage objects merged, later values winning). */
  usageOf: (usage: unknown) => ReportedUsage;
  /** Request fields the upstream turns into tokens: their bytes bound the prompt (estimateTokens). */
  promptFields: string[];
  /** The field that bounds the output, added to the request sent upstream when the client named no max field. */
  outputLimitField: 'max_tokens' | 'max_output_tokens' | null;
}

const key = ByteToken.quoted;
const DONE = [ByteToken.of('[DONE]')];

export const OPERATIONS: Record<OperationName, Operation> = {
  chat: {
    name: 'chat',
    streams: true,
    endpoint: 'chat',
    path: '/chat/completions',
    metricName: 'chat',
    asksStreamUsage: true,
    outputKeys: [key('content'), key('arguments')],
    terminalMarkers: DONE,
    endsWithNamedEvent: false,
    usageOf: (usage) => tokensOf(usage),
    promptFields: ['messages', 'tools', 'functions', 'response_format', 'tool_choice', 'prediction'],
    outputLimitField: 'max_tokens',
  },
  completions: {
    name: 'completions',
    streams: true,
    endpoint: 'completions',
    path: '/completions',
    metricName: 'text_completion',
    asksStreamUsage: true,
    outputKeys: [key('text')],
    terminalMarkers: DONE,
    endsWithNamedEvent: false,
    usageOf: (usage) => tokensOf(usage),
    promptFields: ['prompt', 'suffix'],
    outputLimitField: 'max_tokens',
  },
  embeddings: {
    name: 'embeddings',
    streams: false,
    endpoint: 'embeddings',
    path: '/embeddings',
    metricName: 'embeddings',
    asksStreamUsage: false,
    outputKeys: [],
    terminalMarkers: [],
    endsWithNamedEvent: false,
    usageOf: (usage) => tokensOf(usage, false),
    promptFields: ['input'],
    outputLimitField: null,
  },
  responses: {
    name: 'responses',
    streams: true,
    endpoint: 'responses',
    path: '/responses',
    metricName: 'responses',
    asksStreamUsage: false,
    outputKeys: [key('delta')],
    terminalMarkers: ['"response.completed"', '"response.incomplete"', '"response.failed"'].map(ByteToken.of),
    endsWithNamedEvent: true,
    usageOf: (usage) => tokensOf(usage),
    promptFields: ['instructions', 'input', 'tools', 'text', 'tool_choice', 'prompt'],
    outputLimitField: 'max_output_tokens',
  },
  // Anthropic's Messages API: usage in message_start and message_delta, `max_tokens` required.
  messages: {
    name: 'messages',
    streams: true,
    endpoint: 'messages',
    path: '/messages',
    metricName: 'chat',
    asksStreamUsage: false,
    outputKeys: [key('text'), key('partial_json'), key('thinking')],
    terminalMarkers: [ByteToken.of('"message_stop"')],
    endsWithNamedEvent: true,
    // Its input counts and a first output count: a stream cut before message_delta has not reported its output.
    partialUsageMarkers: [ByteToken.of('"message_start"')],
    usageOf: (usage) => anthropicTokensOf(usage),
    promptFields: ['system', 'messages', 'tools', 'tool_choice'],
    outputLimitField: 'max_tokens',
  },
  // Counting a Messages prompt's tokens: a model request that reserves and uses none.
  count_tokens: {
    name: 'count_tokens',
    streams: false,
    endpoint: 'messages',
    path: '/messages/count_tokens',
    metricName: 'count_tokens',
    asksStreamUsage: false,
    outputKeys: [],
    terminalMarkers: [],
    endsWithNamedEvent: false,
    usageOf: () => ({ prompt_tokens: 0, completion_tokens: 0 }),
    promptFields: [],
    outputLimitField: null,
  },
};

/** The token operation of a kind of model work; undefined for work that uses no tokens (images, audio, fine-tuning). */
export function tokenOperationOf(work: ModelWork): Operation | undefined {
  return Object.hasOwn(OPERATIONS, work) ? OPERATIONS[work as OperationName] : undefined;
}

export interface TokenUsage {
  /** All input processed, cached reads and cache writes included (as OpenAI's prompt_tokens). */
  prompt_tokens: number;
  completion_tokens: number;
  /** Of prompt_tokens, read from the upstream's prompt cache. */
  cached_prompt_tokens?: number;
  /** Of prompt_tokens, written to the upstream's prompt cache. */
  cache_write_tokens?: number;
  /** Of completion_tokens, spent on reasoning. */
  reasoning_tokens?: number;
}

/** What an upstream reported it used: its token counts, or why they cannot be charged. */
export type ReportedUsage = TokenUsage | 'missing' | 'invalid';

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;

/**
 * A part of `whole` an upstream details (`cached_tokens` of `prompt_tokens_details`, …); undefined
 * when it is absent or not a whole count within `whole`. A bad detail is ignored, not the usage: the
 * totals stand, and the tokens it names are priced as plain input or output.
 */
function detailOf(details: unknown, key: string, whole: number): number | undefined {
  if (details === null || typeof details !== 'object') return undefined;
  const value = (details as Record<string, unknown>)[key];
  return isCount(value) && value <= whole ? value : undefined;
}

/**
 * Tokens of an upstream usage object, chat-style (`prompt_tokens`) or Responses-style
 * (`input_tokens`). Every count must be a whole non-negative number: a negative, fractional,
 * NaN-like or string count is 'invalid', no object is 'missing'; both are charged the reservation
 * (docs/limits-and-usage.md, "Charges that hold"). `output`: false for work without output (embeddings).
 * The details (`prompt_tokens_details.cached_tokens`, `completion_tokens_details.reasoning_tokens`,
 * or Responses' `input_tokens_details` / `output_tokens_details`) are read when valid (detailOf).
 */
export function tokensOf(usage: unknown, output = true): ReportedUsage {
  if (usage === null || typeof usage !== 'object' || Array.isArray(usage)) return 'missing';
  const fields = usage as Record<string, unknown>;
  const prompt = fields.prompt_tokens ?? fields.input_tokens;
  const completion = fields.completion_tokens ?? fields.output_tokens ?? (output ? undefined : 0);
  if (!isCount(prompt) || !isCount(completion)) return 'invalid';
  const tokens: TokenUsage = { prompt_tokens: prompt, completion_tokens: completion };
  const cached = detailOf(fields.prompt_tokens_details ?? fields.input_tokens_details, 'cached_tokens', prompt);
  if (cached !== undefined) tokens.cached_prompt_tokens = cached;
  const reasoning = detailOf(fields.completion_tokens_details ?? fields.output_tokens_details, 'reasoning_tokens', completion);
  if (reasoning !== undefined) tokens.reasoning_tokens = reasoning;
  return tokens;
}

/**
 * Tokens of an Anthropic Messages usage object (for a stream: message_start's merged with the last
 * message_delta's). Anthropic's `input_tokens` leaves out the cache, so prompt_tokens is all input
 * processed: `input_tokens` + `cache_read_input_tokens` + `cache_creation_input_tokens`, as
 * OpenAI's prompt_tokens holds its cached tokens. The cache fields are parts of that total, so an
 * invalid one (negative, fractional, a string) makes the usage 'invalid', as a bad total does;
 * absent or null, they count 0.
 */
export function anthropicTokensOf(usage: unknown): ReportedUsage {
  if (usage === null || typeof usage !== 'object' || Array.isArray(usage)) return 'missing';
  const fields = usage as Record<string, unknown>;
  const input = fields.input_tokens;
  const output = fields.output_tokens;
  const cacheRead = fields.cache_read_input_tokens ?? 0;
  const cacheWrite = fields.cache_creation_input_tokens ?? 0;
  if (!isCount(input) || !isCount(output) || !isCount(cacheRead) || !isCount(cacheWrite)) return 'invalid';
  const prompt = input + cacheRead + cacheWrite;
  if (!Number.isSafeInteger(prompt)) return 'invalid';
  return { prompt_tokens: prompt, completion_tokens: output, cached_prompt_tokens: cacheRead, cache_write_tokens: cacheWrite };
}

/**
 * What an inlined image (a `data:` URL as an image part's `url` / `image_url`) is estimated at,
 * whatever its size: its tokens follow its pixels, not its bytes (docs/limits-and-usage.md).
 */
export const INLINE_IMAGE_TOKENS = 2048;
const IMAGE_URL_KEYS = new Set(['url', 'image_url']);

/**
 * An upper bound of the tokens a value turns into: the UTF-8 bytes of its strings and object keys
 * (a token is at least one byte in every script, so CJK text and tool schemas are not
 * under-counted), a number or boolean as one, an inlined image at INLINE_IMAGE_TOKENS. Native
 * byteLength per string: no copy.
 */
export function estimateTokens(value: unknown, depth = 0): number {
  if (typeof value === 'string') return Buffer.byteLength(value, 'utf8');
  if (depth > 1024 || value === null || typeof value !== 'object') return typeof value === 'number' || typeof value === 'boolean' ? 1 : 0;
  let tokens = 0;
  if (Array.isArray(value)) {
    for (const item of value) tokens += estimateTokens(item, depth + 1);
    return tokens;
  }
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    tokens += key.length;
    tokens += typeof item === 'string' && IMAGE_URL_KEYS.has(key) && item.startsWith('data:image/') ? INLINE_IMAGE_TOKENS : estimateTokens(item, depth + 1);
  }
  return tokens;
}

/** The prompt estimate of a request body for an operation: every field it turns into tokens, and the stored history it continues. */
export function estimatePromptTokens(operation: Operation, body: Record<string, unknown>, historyTokens = 0): number {
  let tokens = historyTokens;
  for (const field of operation.promptFields) tokens += estimateTokens(body[field]);
  return tokens;
}
