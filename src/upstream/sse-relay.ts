import { Transform, type TransformCallback } from 'node:stream';

const BLANK_LF = Buffer.from('\n\n');
const BLANK_CRLF = Buffer.from('\r\n\r\n');
const CR = 13;
const QUOTE = 34;
const BACKSLASH = 92;
const SPACE = 32;
const OPEN_BRACE = 123;
const DONE = Buffer.from('[DONE]');
const USAGE_KEY = Buffer.from('"usage"');
const CONTENT_KEY = Buffer.from('"content":');

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

export interface SseRelayOptions {
  /** Drop the usage-only chunk (empty `choices`, a `usage` object): the client did not ask for it. */
  hideUsageChunk: boolean;
  /** Keep the text of `choices[0].delta.content` (to store the assistant reply). */
  captureContent: boolean;
  onFirstByte?: () => void;
  onFirstToken?: () => void;
  /** Runs after the last event passed through and before the response ends (stores the conversation). */
  beforeEnd?: () => Promise<void>;
}

/** End of the event starting at `from` (index past its blank line), or -1 when it is not complete yet. */
function eventEnd(buf: Buffer, from: number, hasCr: boolean): number {
  const lf = buf.indexOf(BLANK_LF, from);
  if (!hasCr) return lf === -1 ? -1 : lf + 2;
  const crlf = buf.indexOf(BLANK_CRLF, from);
  if (lf === -1) return crlf === -1 ? -1 : crlf + 4;
  return crlf === -1 || lf < crlf ? lf + 2 : crlf + 4;
}

/** Index of the closing quote of the JSON string whose opening quote is at `open`, or -1. */
function stringEnd(view: Buffer, open: number): number {
  for (let i = open + 1; i < view.length; i++) {
    if (view[i] === BACKSLASH) i++;
    else if (view[i] === QUOTE) return i;
  }
  return -1;
}

function skipSpaces(view: Buffer, at: number): number {
  while (view[at] === SPACE) at++;
  return at;
}

/** The JSON of an event's data lines (`data:` fields joined), parsed; null when it is not JSON. */
function parseData(view: Buffer): Record<string, unknown> | null {
  const data = view
    .toString('utf8')
    .split(/\r?\n/)
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(line[5] === ' ' ? 6 : 5))
    .join('\n');
  try {
    return JSON.parse(data) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/**
 * Passes an upstream server-sent-event stream through as the bytes arrive, complete events at a
 * time, without re-serialising anything. It scans each event for three things only: the usage
 * object (parsed: one event a stream), whether the event carries content (counted, so an early
 * end can still be metered), and `[DONE]`. The usage-only chunk is dropped when the client did
 * not ask for it.
 */
export class SseRelay extends Transform {
  usage: TokenUsage | null = null;
  contentEvents = 0;
  sawDone = false;
  private readonly pieces: string[] = [];
  private tail: Buffer | null = null;
  private started = false;
  private tokenSeen = false;

  constructor(private readonly options: SseRelayOptions) {
    super();
  }

  get content(): string {
    return this.pieces.join('');
  }

  /** Drops a partial event (the upstream broke off mid-event) and writes `event` as the last one. */
  endWith(event: string): void {
    this.tail = null;
    if (!this.writableEnded) this.end(Buffer.from(event));
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    const buf = this.tail ? Buffer.concat([this.tail, chunk]) : chunk;
    this.tail = null;
    const hasCr = buf.includes(CR);
    let position = 0;
    let emitFrom = 0;
    for (;;) {
      const end = eventEnd(buf, position, hasCr);
      if (end === -1) break;
      if (this.inspect(buf.subarray(position, end))) {
        if (position > emitFrom) this.forward(buf.subarray(emitFrom, position));
        emitFrom = end;
      }
      position = end;
    }
    if (position > emitFrom) this.forward(buf.subarray(emitFrom, position));
    if (position < buf.length) this.tail = Buffer.from(buf.subarray(position));
    callback();
  }

  override _flush(callback: TransformCallback): void {
    if (this.tail) {
      const rest = this.tail;
      this.tail = null;
      if (!this.inspect(rest)) this.forward(rest);
    }
    const beforeEnd = this.options.beforeEnd;
    if (!beforeEnd) return callback();
    beforeEnd().then(
      () => callback(),
      () => callback(),
    );
  }

  private forward(bytes: Buffer): void {
    if (!this.started) {
      this.started = true;
      this.options.onFirstByte?.();
    }
    this.push(bytes);
  }

  /** Looks at one complete event; returns true when it is to be dropped. */
  private inspect(view: Buffer): boolean {
    if (view.length < 24 && view.includes(DONE)) {
      this.sawDone = true;
      return false;
    }
    const usageAt = view.indexOf(USAGE_KEY);
    if (usageAt !== -1) {
      let at = skipSpaces(view, usageAt + USAGE_KEY.length);
      if (view[at] === 58 /* : */) at = skipSpaces(view, at + 1);
      if (view[at] === OPEN_BRACE) {
        const data = parseData(view);
        const usage = data?.usage as Partial<TokenUsage> | undefined;
        if (usage && typeof usage === 'object') {
          this.usage = { prompt_tokens: Number(usage.prompt_tokens) || 0, completion_tokens: Number(usage.completion_tokens) || 0 };
        }
        if (Array.isArray(data?.choices) && data.choices.length === 0) return this.options.hideUsageChunk;
      }
    }
    this.scanContent(view);
    return false;
  }

  private scanContent(view: Buffer): void {
    const keyAt = view.indexOf(CONTENT_KEY);
    if (keyAt === -1) return;
    const open = skipSpaces(view, keyAt + CONTENT_KEY.length);
    if (view[open] !== QUOTE || view[open + 1] === QUOTE) return;
    this.contentEvents++;
    if (!this.tokenSeen) {
      this.tokenSeen = true;
      this.options.onFirstToken?.();
    }
    if (!this.options.captureContent) return;
    const close = stringEnd(view, open);
    if (close === -1) return;
    try {
      this.pieces.push(JSON.parse(view.toString('utf8', open, close + 1)) as string);
    } catch {
      // not a JSON string after all: nothing to keep
    }
  }
}
