/** The `models[].endpoints` names: which model routes a model may serve. */
export const MODEL_ENDPOINTS = ['chat', 'completions', 'embeddings', 'responses', 'images', 'audio', 'fine_tuning'] as const;
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
  /** Request fields whose text estimates the prompt when the upstream reports no usage. */
  promptFields: string[];
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
    promptFields: ['messages'],
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
    promptFields: ['instructions', 'input'],
  },
};

/** The token operation of a kind of model work; undefined for work that uses no tokens (images, audio, fine-tuning). */
export function tokenOperationOf(work: ModelWork): Operation | undefined {
  return Object.hasOwn(OPERATIONS, work) ? OPERATIONS[work as OperationName] : undefined;
}

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

/** Tokens of an upstream usage object: chat-style (`prompt_tokens`) or Responses-style (`input_tokens`). */
export function tokensOf(usage: Record<string, unknown> | null | undefined): TokenUsage | null {
  if (!usage || typeof usage !== 'object') return null;
  const prompt = Number(usage.prompt_tokens ?? usage.input_tokens ?? 0);
  const completion = Number(usage.completion_tokens ?? usage.output_tokens ?? 0);
  return { prompt_tokens: prompt, completion_tokens: completion };
}

/** Characters of every string inside a value (a rough prompt size when the upstream reports none). */
function textLength(value: unknown, depth = 0): number {
  if (typeof value === 'string') return value.length;
  if (depth > 64 || value === null || typeof value !== 'object') return 0;
  let length = 0;
  for (const item of Array.isArray(value) ? value : Object.values(value)) length += textLength(item, depth + 1);
  return length;
}

/** A rough token count (4 characters a token), used only when the upstream reports no usage. */
export function estimateTokens(value: unknown): number {
  const length = textLength(value);
  return length === 0 ? 0 : Math.ceil(length / 4);
}

/** The prompt estimate of a request body for an operation. */
export function estimatePromptTokens(operation: Operation, body: Record<string, unknown>, history: unknown[] = []): number {
  let tokens = estimateTokens(history);
  for (const field of operation.promptFields) tokens += estimateTokens(body[field]);
  return tokens;
}
