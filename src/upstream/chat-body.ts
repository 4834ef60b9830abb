import type { MessageContent } from '../store/conversation-types.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: MessageContent;
  [field: string]: unknown;
}

/** A chat completion request as the client sent it (validated); unknown fields ride along. */
export interface ChatBody {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean; [field: string]: unknown } | null;
  conversation_id?: string;
  store?: boolean;
  [field: string]: unknown;
}

/** Fields the gateway consumes itself and does not send upstream. */
const GATEWAY_FIELDS = new Set(['conversation_id', 'store']);

/**
 * The body sent upstream: the client's fields unchanged except the model name of the target,
 * the stored history before the new messages, and (streams) usage requested from the upstream.
 */
export function upstreamBody(body: ChatBody, upstreamModel: string, history: ChatMessage[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key in body) if (!GATEWAY_FIELDS.has(key)) out[key] = body[key];
  out.model = upstreamModel;
  if (history.length) out.messages = [...history, ...body.messages];
  if (body.stream === true) out.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
  return out;
}

/** The text of message content: the string, or the text parts joined. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) {
    if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') text += (part as { text: string }).text;
  }
  return text;
}

/**
 * A rough token count (4 characters a token) used only when the upstream reports no usage:
 * an upstream without usage reporting, or a stream that ended before its usage chunk.
 */
export function estimateTokens(text: string): number {
  return text.length === 0 ? 0 : Math.ceil(text.length / 4);
}

export function estimatePromptTokens(messages: ChatMessage[]): number {
  let tokens = 0;
  for (const message of messages) tokens += estimateTokens(textOf(message.content)) + 4;
  return tokens;
}
