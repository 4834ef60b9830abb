import type { Readable, Writable } from 'node:stream';
import { COLON, QUOTE } from '../core/json-codes.js';
import { ByteToken, findKey, holds, lastObjectRange, latin1, objectAt, removeNullMembers, replaceStringValue } from '../core/json-bytes.js';
import type { Operation, ReportedUsage } from '../core/operations.js';

const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const TAB = 0x09;
/** The byte pairs where a blank line starts (see BlankLines). */
const BLANK_PAIRS = ['\n\n', '\n\r', '\r\r'];
const LF_LF = Buffer.from('\n\n');
const LF_CR = Buffer.from('\n\r');
const CR_CR = Buffer.from('\r\r');
const USAGE_KEY = ByteToken.quoted('usage');
const MODEL_KEY = ByteToken.quoted('model');

/**
 * Rebuilds an upstream's events in another API (an OpenAI chat stream as Anthropic's Messages
 * events): it sees every complete event, `[DONE]` included, and replaces the pass-through.
 */
export interface EventTranslator {
  /** One complete upstream event → what the client gets for it (null: nothing yet). */
  event(event: Buffer): Buffer | null;
  /** The upstream finished (`[DONE]`, or its end): the closing events, once; null when none are due. */
  end(): Buffer | null;
  /** The usage the upstream reported; null until it came. */
  readonly usage: ReportedUsage | null;
  /** The stream reached its regular end. */
  readonly completed: boolean;
}

export interface SseRelayOptions {
  operation: Operation;
  /** Events are translated rather than passed through (then hideUsage and publicModel do not apply). */
  translate?: EventTranslator;
  /** The client did not ask for usage: drop the usage chunk (whatever its shape) and `"usage":null` members. */
  hideUsage: boolean;
  /** The public model id as a JSON string literal: every event's `model` is rewritten to it. */
  publicModel: ByteToken | null;
  /** Largest event accepted; a larger one stops the relay and calls onOversize. */
  maxEventBytes: number;
  /** Sees every complete event as it passes (conversation capture). */
  onEvent?: (event: Buffer) => void;
  onFirstByte?: () => void;
  onFirstToken?: () => void;
  /** An event passed `maxEventBytes`: the relay stopped; the owner ends the stream (endWith). */
  onOversize?: () => void;
  /** Runs after the last event passed through and before the response ends (stores the conversation). */
  beforeEnd?: () => Promise<void>;
  /** The upstream ended its stream before the terminal event: the last event to send the client (an error), or null. */
  onIncompleteEnd?: () => Buffer | null;
}

/*
 * Framing (the WHATWG server-sent events rules): a line ends at CRLF, at a lone LF or at a lone CR;
 * an event ends at a blank line, i.e. where a line end follows a line end. An LF always closes a
 * line end, and a CR followed by a CR is a whole one, so a blank line starts exactly at the second
 * byte of a `\n\n`, `\n\r` or `\r\r` pair (`\r\n` is one line end); the event ends past that
 * byte, and past one more when it is the CR of a CRLF.
 */

/** The blank lines of a text that holds a CR: each pair searched once, its next occurrence kept. */
class BlankLines {
  /** Per pair, its first occurrence at or after the last search start; -1 when there is none left. */
  private readonly next = [-2, -2, -2];

  constructor(private readonly text: string) {}

  /** Index of the first pair at or after `from`, or -1. */
  first(from: number): number {
    let first = -1;
    for (let pair = 0; pair < 3; pair++) {
      let at = this.next[pair]!;
      if (at !== -1 && at < from) this.next[pair] = at = this.text.indexOf(BLANK_PAIRS[pair]!, from);
      if (at !== -1 && (first === -1 || at < first)) first = at;
    }
    return first;
  }
}

/** End of the event starting at `from` (index past its blank line) in `text`, or -1 when it is not complete yet. */
function eventEnd(text: string, from: number, blanks: BlankLines | null): number {
  if (!blanks) {
    const lf = text.indexOf('\n\n', from);
    return lf === -1 ? -1 : lf + 2;
  }
  const at = blanks.first(from);
  if (at === -1) return -1;
  return text.charCodeAt(at + 1) === CR && text.charCodeAt(at + 2) === LF ? at + 3 : at + 2;
}

/** Whether `chunk`, arriving after held bytes that end with the byte `last` and hold no blank line, completes an event. */
function completesEvent(last: number, chunk: Buffer): boolean {
  const first = chunk[0];
  if ((last === LF && (first === LF || first === CR)) || (last === CR && first === CR)) return true;
  if (chunk.indexOf(LF_LF) !== -1) return true;
  return chunk.indexOf(CR) !== -1 && (chunk.indexOf(LF_CR) !== -1 || chunk.indexOf(CR_CR) !== -1);
}

/**
 * Whether the event's data is `[DONE]` (trailing blanks aside): it has one `data` field, and that is
 * its value, whatever the size of the event and its other lines (comments, `event`, `id`). A
 * `data:` line of any other value answers at its first bytes, so a JSON event costs a few reads.
 */
function isDoneEvent(text: string): boolean {
  let seen = false;
  for (let at = 0; at < text.length; ) {
    let end = at;
    if (text.startsWith('data', at) && text.charCodeAt(at + 4) === COLON) {
      if (seen) return false;
      seen = true;
      let value = at + 5;
      if (text.charCodeAt(value) === SPACE) value++;
      if (!text.startsWith('[DONE]', value)) return false;
      end = value + 6;
      while (text.charCodeAt(end) === SPACE || text.charCodeAt(end) === TAB) end++;
      if (end < text.length && text.charCodeAt(end) !== LF && text.charCodeAt(end) !== CR) return false;
    } else {
      // Another field, a comment or a blank line; a bare `data` line is a data field with no value.
      if (text.startsWith('data', at) && (at + 4 === text.length || text.charCodeAt(at + 4) === LF || text.charCodeAt(at + 4) === CR)) return false;
      while (end < text.length && text.charCodeAt(end) !== LF && text.charCodeAt(end) !== CR) end++;
    }
    at = text.charCodeAt(end) === CR && text.charCodeAt(end + 1) === LF ? end + 2 : end + 1;
  }
  return seen;
}

/** The JSON of an event's data lines (`data:` fields joined), parsed; null when it is not a JSON object. */
export function parseEventData(event: Buffer): Record<string, unknown> | null {
  const text = event.toString('utf8').trimEnd();
  // Nearly every event is one `data:` line: parsed as it is, without splitting.
  const data =
    text.startsWith('data:') && !text.includes('\n') && !text.includes('\r')
      ? text.slice(text[5] === ' ' ? 6 : 5)
      : text
          .split(/\r\n?|\n/)
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(line[5] === ' ' ? 6 : 5))
          .join('\n');
  try {
    const parsed: unknown = JSON.parse(data);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** True when a value carries nothing a client would read: null, '', [] or an object of such. */
function carriesNothing(value: unknown): boolean {
  if (value === null || value === undefined || value === '') return true;
  if (Array.isArray(value)) return value.every(carriesNothing);
  if (typeof value === 'object') return Object.entries(value).every(([name, inner]) => name === 'role' || carriesNothing(inner));
  return false;
}

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** A usage chunk the client did not ask for (its data parsed): dropped, or (when it also carries output) sent without its usage. */
function withoutUsage(data: Record<string, unknown>): Buffer | null {
  const choices = data.choices;
  if (!Array.isArray(choices) || choices.every(emptyChoice)) return null;
  delete data.usage;
  return Buffer.from(`data: ${JSON.stringify(data)}\n\n`);
}

/** A choice of a usage chunk that only frames it (index, empty delta, no finish_reason). */
function emptyChoice(choice: unknown): boolean {
  if (choice === null || typeof choice !== 'object') return true;
  return Object.entries(choice).every(([name, value]) => name === 'index' || carriesNothing(value));
}

/**
 * Passes an upstream server-sent-event stream through as the bytes arrive, complete events at a
 * time, without re-serialising them. Per event it looks for a few keys only: `usage` (read from
 * the one event that carries it), `model` (rewritten in place to the public id when it differs),
 * output keys (counted, so an early end can still be metered) and the terminal marker. An event
 * is re-serialised in one case: a usage chunk the client did not ask for that also carries output.
 *
 * It reads the upstream body's 'data' events and writes to the sink (the client's response)
 * itself: no stream sits between the two sockets, since each layer costs every chunk as much as
 * the relaying does. The upstream is paused while the client reads slower than it writes.
 */
export class SseRelay {
  /** The usage object of the stream, as read (tokensOf); null until one arrives. */
  usage: ReportedUsage | null = null;
  outputEvents = 0;
  /** The stream's terminal event passed (`[DONE]`, `response.completed`, …). */
  completed = false;
  private usageFields: Record<string, unknown> | null = null;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /**
   * The last event ended with a CR at the end of the bytes so far: an LF arriving next is the rest
   * of that CRLF, not a blank line, and goes to the client only if the event went as it came.
   */
  private lfAfterCr: 'forward' | 'drop' | null = null;
  private stopped = false;
  private started = false;
  private tokenSeen = false;
  private finishing = false;
  private waitingForDrain = false;
  /** What this event-loop turn relayed, written to the client as one chunk when the turn is over. */
  private outgoing: Buffer[] = [];
  private outgoingBytes = 0;
  private flushScheduled = false;
  private source: Readable | null = null;

  constructor(
    private readonly options: SseRelayOptions,
    private readonly sink: Writable,
  ) {}

  /** Relays `source` (an upstream body) until it ends. */
  relayFrom(source: Readable): void {
    this.source = source;
    source.on('data', (chunk: Buffer) => this.accept(chunk));
    source.once('end', () => this.finish());
  }

  /** Drops a partial event and writes `event` as the last one; later input is ignored. */
  endWith(event: string): void {
    this.stop();
    if (this.finishing) return;
    this.forward(Buffer.from(event));
    this.finish();
  }

  /**
   * Takes the next bytes of the upstream stream. Line endings go to the client as the upstream
   * wrote them: it gets whole events of the upstream's bytes, so any framing the standard allows
   * stays valid (the relay's own events, written in their place, end with LF).
   */
  accept(chunk: Buffer): void {
    if (this.stopped || chunk.length === 0) return;
    let buf = chunk;
    if (this.lfAfterCr !== null) {
      const forwardLf = this.lfAfterCr === 'forward';
      this.lfAfterCr = null;
      if (chunk[0] === LF) {
        if (forwardLf) this.forward(chunk.subarray(0, 1));
        if (chunk.length === 1) return;
        buf = chunk = chunk.subarray(1);
      }
    }
    if (this.pending.length > 0) {
      // Held bytes hold no blank line: only the new ones (and the last byte held before them) can
      // complete the pending event, so a large event costs one concatenation, not one per chunk.
      const held = this.pending[this.pending.length - 1]!;
      if (!completesEvent(held[held.length - 1]!, chunk)) {
        this.hold(chunk);
        return;
      }
      buf = Buffer.concat([...this.pending, chunk]);
      this.pending = [];
      this.pendingBytes = 0;
    }
    this.relay(buf);
  }

  /** The upstream stream ended: the rest is relayed, `beforeEnd` runs, then the stream ends. */
  finish(): void {
    if (this.finishing) return;
    this.finishing = true;
    if (!this.stopped && this.pending.length > 0) {
      const rest = Buffer.concat(this.pending);
      this.pending = [];
      const out = this.inspect(rest);
      if (out) this.forward(out);
    }
    if (!this.stopped && this.options.translate) {
      const closing = this.translated(null);
      if (closing) this.forward(closing);
    }
    if (!this.stopped && !this.completed) {
      const last = this.options.onIncompleteEnd?.();
      if (last) this.forward(last);
    }
    // The last events leave with the end of the response: one write.
    const end = () => void (this.outgoing.length > 0 ? this.sink.end(this.takeOutgoing()) : this.sink.end());
    const beforeEnd = this.options.beforeEnd;
    if (!beforeEnd) return end();
    beforeEnd().then(end, end);
  }

  private relay(buf: Buffer): void {
    // The bytes as a latin1 string (one character per byte: the same positions), searched with
    // String's indexOf: a Buffer's crosses into C++ on every call, and an event takes five or six.
    const text = buf.toString('latin1');
    const blanks = text.includes('\r') ? new BlankLines(text) : null;
    let position = 0;
    let emitFrom = 0;
    for (;;) {
      const end = eventEnd(text, position, blanks);
      if (end === -1) break;
      // The LF of a CRLF blank line is left out of the size: it may come after the event went (see lfAfterCr).
      const size = blanks && text.charCodeAt(end - 1) === LF && text.charCodeAt(end - 2) === CR ? end - position - 1 : end - position;
      if (size > this.options.maxEventBytes) {
        // The complete events before it still reach the client, ahead of the owner's error event.
        if (position > emitFrom) this.forward(buf.subarray(emitFrom, position));
        return this.oversize();
      }
      // A token server's chunk is usually one whole event: then no view of it is made.
      const whole = position === 0 && end === buf.length;
      const event = whole ? buf : buf.subarray(position, end);
      const relayed = this.inspect(event, whole ? text : text.slice(position, end));
      if (relayed !== event) {
        if (position > emitFrom) this.forward(buf.subarray(emitFrom, position));
        if (relayed) this.forward(relayed);
        emitFrom = end;
      }
      // A CR ends the blank line whatever follows it, so the event went at once; an LF next would complete that CRLF.
      if (end === buf.length && text.charCodeAt(end - 1) === CR) this.lfAfterCr = relayed !== null && relayed[relayed.length - 1] === CR ? 'forward' : 'drop';
      position = end;
    }
    if (position > emitFrom) this.forward(emitFrom === 0 && position === buf.length ? buf : buf.subarray(emitFrom, position));
    if (position < buf.length) this.hold(Buffer.from(buf.subarray(position)));
  }

  private hold(bytes: Buffer): void {
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    if (this.pendingBytes > this.options.maxEventBytes) this.oversize();
  }

  private stop(): void {
    this.stopped = true;
    this.pending = [];
    this.pendingBytes = 0;
    this.lfAfterCr = null;
  }

  private oversize(): void {
    this.stop();
    // The owner answers with an error event and closes the upstream; not from inside _transform.
    queueMicrotask(() => this.options.onOversize?.());
  }

  private forward(bytes: Buffer): void {
    if (!this.started) {
      this.started = true;
      this.options.onFirstByte?.();
    }
    this.outgoing.push(bytes);
    this.outgoingBytes += bytes.length;
    // Past what the client's response buffers, at once: its backpressure applies as before.
    if (this.outgoingBytes >= this.sink.writableHighWaterMark) return this.flush();
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(this.flushAtTurnEnd);
    }
  }

  /**
   * What is relayed within one event-loop turn leaves as one chunk of the response, in one write:
   * the upstream's events that arrived together (a token server writes each alone, and each write
   * of a chunked response is four writes to its socket: size, CRLF, data, CRLF), and the last
   * events with the end of the response. While finishing (storing the conversation before the
   * end), the last events wait and leave with the end.
   */
  private readonly flushAtTurnEnd = () => {
    this.flushScheduled = false;
    if (!this.finishing && !this.sink.writableEnded && !this.sink.destroyed) this.flush();
  };

  private takeOutgoing(): Buffer {
    const bytes = this.outgoing.length === 1 ? this.outgoing[0]! : Buffer.concat(this.outgoing, this.outgoingBytes);
    this.outgoing.length = 0;
    this.outgoingBytes = 0;
    return bytes;
  }

  private flush(): void {
    if (this.outgoing.length === 0) return;
    if (this.sink.write(this.takeOutgoing()) || this.waitingForDrain || !this.source) return;
    // The client reads slower than the upstream writes: the upstream waits.
    this.waitingForDrain = true;
    this.source.pause();
    this.sink.once('drain', () => {
      this.waitingForDrain = false;
      this.source?.resume();
    });
  }

  /** Looks at one complete event (`text`: its latin1 string, see relay); returns it, its rewritten form, or null to drop it. */
  private inspect(event: Buffer, text = latin1(event)): Buffer | null {
    const { operation, hideUsage, publicModel, translate } = this.options;
    if (isDoneEvent(text)) {
      if (translate) return this.translated(null);
      this.completed = true;
      return event;
    }
    if (translate) return this.translated(event);
    let out = event;
    // The text of `out`, as long as it is the event as received.
    let outText = text;
    if (holds(text, USAGE_KEY)) {
      // Usage the client did not ask for, as an object: the event is parsed whole anyway (see
      // withoutUsage), so its usage is read from that, not from the bytes a second time. A
      // `"usage":null` member (which some upstreams put on every chunk) is removed without a parse.
      const range = lastObjectRange(text, USAGE_KEY);
      const data = range !== null && hideUsage ? parseEventData(event) : null;
      const usage = data !== null && isObject(data.usage) ? data.usage : objectAt(event, range);
      if (usage) {
        const merged = this.mergeUsage(usage);
        if (!operation.partialUsageMarkers?.some((marker) => holds(text, marker))) this.usage = operation.usageOf(merged);
        if (hideUsage) {
          const hidden = data === null ? event : withoutUsage(data);
          if (hidden === null) return null;
          out = hidden;
        }
      } else if (hideUsage) {
        out = removeNullMembers(event, USAGE_KEY);
      }
      if (out !== event) outText = latin1(out);
    }
    if (!this.completed && operation.endsWithNamedEvent && operation.terminalMarkers.some((marker) => holds(text, marker))) {
      this.completed = true;
    }
    // Output is counted on the text before the model is renamed: renaming a string value moves no key.
    this.countOutput(outText);
    if (publicModel) out = replaceStringValue(out, MODEL_KEY, publicModel, outText);
    this.options.onEvent?.(out);
    return out;
  }

  /** An upstream event translated (null: the upstream's end), what it reported taken over. */
  private translated(event: Buffer | null): Buffer | null {
    const translate = this.options.translate!;
    const out = event === null ? translate.end() : translate.event(event);
    this.usage = translate.usage;
    this.completed = translate.completed;
    if (out !== null) this.countOutput(latin1(out));
    return out;
  }

  /**
   * The usage objects of the stream so far, merged: a Messages stream reports input in
   * message_start and output in message_delta (whose input fields may be null: not a report).
   */
  private mergeUsage(usage: Record<string, unknown>): Record<string, unknown> {
    if (this.usageFields === null) return (this.usageFields = usage);
    for (const name in usage) if (usage[name] !== null) this.usageFields[name] = usage[name];
    return this.usageFields;
  }

  private countOutput(text: string): void {
    for (const key of this.options.operation.outputKeys) {
      const found = findKey(text, key);
      if (!found || text.charCodeAt(found.valueStart) !== QUOTE || text.charCodeAt(found.valueStart + 1) === QUOTE) continue;
      this.outputEvents++;
      if (!this.tokenSeen) {
        this.tokenSeen = true;
        this.options.onFirstToken?.();
      }
      return;
    }
  }
}
