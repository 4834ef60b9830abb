/** A message of a chat request as the client wrote it: only `role` is read; everything else rides along. */
export interface ChatMessage {
  role: string;
  content?: unknown;
  [field: string]: unknown;
}

export interface UpstreamBodyOptions {
  /** Fields the gateway consumes itself and does not send upstream. */
  drop?: ReadonlySet<string>;
  /** Stored conversation history, sent before the request's messages. */
  history?: ChatMessage[];
  /** Ask a stream for its usage (`stream_options.include_usage`), whatever the client asked. */
  askStreamUsage?: boolean;
}

/**
 * The body sent upstream: the client's fields as written, except the target's model name, the
 * fields the gateway consumes, stored history before the new messages, and (streams) usage asked.
 */
export function upstreamBody(body: Record<string, unknown>, upstreamModel: string, options: UpstreamBodyOptions = {}): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key in body) if (!options.drop?.has(key)) out[key] = body[key];
  out.model = upstreamModel;
  if (options.history?.length) out.messages = [...options.history, ...(body.messages as ChatMessage[])];
  if (options.askStreamUsage && body.stream === true) {
    const asked = body.stream_options;
    out.stream_options = { ...(asked !== null && typeof asked === 'object' ? asked : {}), include_usage: true };
  }
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
