/** The `models[].endpoints` names: which model routes a model may serve. */
export const MODEL_ENDPOINTS = ['chat', 'completions', 'embeddings', 'responses', 'images', 'audio', 'fine_tuning', 'messages'] as const;
export type ModelEndpointName = (typeof MODEL_ENDPOINTS)[number];
import { ByteToken } from './json-bytes.js';

/** The OpenAI model routes the gateway proxies, and what differs between them. */
export type OperationName = 'chat' | 'completions' | 'embeddings' | 'responses';

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
  /** Markers of the event that completes a stream (`[DONE]`, or the Responses API's terminal events). */
  terminalMarkers: ByteToken[];
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
    promptFields: ['instructions', 'input', 'tools', 'text', 'tool_choice', 'prompt'],
    outputLimitField: 'max_output_tokens',
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
 * Tokens of an upstream usage object, chat-style (`prompt_tokens`) or Responses-style
 * (`input_tokens`). Every count must be a whole non-negative number: a negative, fractional,
 * NaN-like or string count is 'invalid', no object is 'missing'; both are charged the reservation
 * (docs/limits-and-usage.md, "Charges that hold"). `output`: false for work without output (embeddings).
 */
export function tokensOf(usage: unknown, output = true): ReportedUsage {
  if (usage === null || typeof usage !== 'object' || Array.isArray(usage)) return 'missing';
  const fields = usage as Record<string, unknown>;
  const prompt = fields.prompt_tokens ?? fields.input_tokens;
  const completion = fields.completion_tokens ?? fields.output_tokens ?? (output ? undefined : 0);
  return isCount(prompt) && isCount(completion) ? { prompt_tokens: prompt, completion_tokens: completion } : 'invalid';
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
