/**
 * Byte-level reads and edits of upstream JSON, for the few fields the gateway touches (`model`,
 * `usage`), so a reply or stream event passes through without being parsed and re-serialised.
 *
 * A key is recognised only where a key can stand: its opening quote follows `{` or `,` (spaces
 * allowed). Inside a JSON string every quote is escaped, so text that merely contains `"model":`
 * is never taken for the key.
 *
 * The bytes are searched as their latin1 string (one character per byte, so the same positions):
 * String's indexOf and charCodeAt run in JavaScript, where a Buffer's indexOf crosses into C++ on
 * every call. The structural characters are ASCII, and no byte of a multi-byte UTF-8 character is
 * ASCII, so positions found in the latin1 text are those of the bytes.
 */

import { CLOSE_BRACE, CLOSE_BRACKET, COLON, COMMA, OPEN_BRACE, OPEN_BRACKET, QUOTE, stringEnd } from './json-codes.js';

/** Something to look for (a quoted key, a marker, a JSON string literal): its bytes and its latin1 text. */
export class ByteToken {
  readonly text: string;
  /** The text after a leading quote (see indexIn); the whole text otherwise. */
  private readonly searched: string;
  private readonly quoted: boolean;

  constructor(readonly bytes: Buffer) {
    this.text = bytes.toString('latin1');
    this.quoted = this.text.length > 1 && this.text.charCodeAt(0) === QUOTE;
    this.searched = this.quoted ? this.text.slice(1) : this.text;
  }

  /**
   * The first index at or after `from` where the token stands in `text`, or -1. A quoted token is
   * searched without its quote, then the quote checked: JSON text is full of quotes, and a search
   * runs from one occurrence of the pattern's first character to the next.
   */
  indexIn(text: string, from = 0): number {
    if (!this.quoted) return text.indexOf(this.searched, from);
    for (let at = text.indexOf(this.searched, from + 1); at !== -1; at = text.indexOf(this.searched, at + 1)) {
      if (text.charCodeAt(at - 1) === QUOTE) return at - 1;
    }
    return -1;
  }

  /** The last index at or before `from` where the token stands in `text`, or -1. */
  lastIndexIn(text: string, from = text.length): number {
    if (!this.quoted) return text.lastIndexOf(this.searched, from);
    for (let at = text.lastIndexOf(this.searched, from + 1); at > 0; at = text.lastIndexOf(this.searched, at - 1)) {
      if (text.charCodeAt(at - 1) === QUOTE) return at - 1;
    }
    return -1;
  }

  static of(raw: string): ByteToken {
    return new ByteToken(Buffer.from(raw));
  }

  /** A JSON string literal, quotes included: a key to find, or a value to write. */
  static quoted(value: string): ByteToken {
    return ByteToken.of(JSON.stringify(value));
  }
}

/** The text the functions below search: the bytes as latin1. */
export const latin1 = (buf: Buffer): string => buf.toString('latin1');

function isSpace(code: number): boolean {
  return code === 32 || code === 9 || code === 10 || code === 13;
}

function skipSpaces(text: string, at: number): number {
  while (isSpace(text.charCodeAt(at))) at++;
  return at;
}

/** Where a key stands: its opening quote, and where its value starts. */
export interface KeyAt {
  keyStart: number;
  valueStart: number;
}

/** Where the value of the key whose quote is at `quote` starts, or -1 when what is there is not a key. */
function valueAfterKey(text: string, quote: number, keyLength: number): number {
  let before = quote - 1;
  while (before >= 0 && isSpace(text.charCodeAt(before))) before--;
  const preceding = text.charCodeAt(before);
  if (preceding !== OPEN_BRACE && preceding !== COMMA) return -1;
  const colon = skipSpaces(text, quote + keyLength);
  if (text.charCodeAt(colon) !== COLON) return -1;
  return skipSpaces(text, colon + 1);
}

/** The first occurrence of `key` (a quoted key) as a key in `text`, searching from `from`. */
export function findKey(text: string, key: ByteToken, from = 0): KeyAt | null {
  const length = key.text.length;
  for (let at = key.indexIn(text, from); at !== -1; at = key.indexIn(text, at + 1)) {
    const valueStart = valueAfterKey(text, at, length);
    if (valueStart !== -1) return { keyStart: at, valueStart };
  }
  return null;
}

/** Whether `text` holds the token. */
export function holds(text: string, token: ByteToken): boolean {
  return token.indexIn(text) !== -1;
}

/** The last occurrence of `key` as a key. */
function findLastKey(text: string, key: ByteToken): KeyAt | null {
  const length = key.text.length;
  for (let at = key.lastIndexIn(text); at !== -1; at = at === 0 ? -1 : key.lastIndexIn(text, at - 1)) {
    const valueStart = valueAfterKey(text, at, length);
    if (valueStart !== -1) return { keyStart: at, valueStart };
  }
  return null;
}

/** End (exclusive) of the object or array that opens at `open`, or -1 when it is not closed in `text`. */
export function compositeEnd(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === QUOTE) {
      i = stringEnd(text, i);
      if (i === -1) return -1;
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      depth++;
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** Where the object value of the last `key` key starts and ends (exclusive), or null when that value is not an object. */
export function lastObjectRange(text: string, key: ByteToken): { start: number; end: number } | null {
  const found = findLastKey(text, key);
  if (!found || text.charCodeAt(found.valueStart) !== OPEN_BRACE) return null;
  const end = compositeEnd(text, found.valueStart);
  return end === -1 ? null : { start: found.valueStart, end };
}

/** The object at `range` of `buf` (see lastObjectRange), parsed, or null. */
export function objectAt(buf: Buffer, range: { start: number; end: number } | null): Record<string, unknown> | null {
  if (range === null) return null;
  try {
    return JSON.parse(buf.toString('utf8', range.start, range.end)) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/** The object value of the last `key` key, parsed (a small object such as `usage`), or null. */
export function lastObjectValue(buf: Buffer, key: ByteToken, text = latin1(buf)): Record<string, unknown> | null {
  return objectAt(buf, lastObjectRange(text, key));
}

/**
 * Replaces the string value of the first `key` key with `replacement` (a JSON string literal,
 * quotes included). Returns `buf` itself when the key is absent, not a string, or already equal.
 */
export function replaceStringValue(buf: Buffer, key: ByteToken, replacement: ByteToken, text = latin1(buf)): Buffer {
  const found = findKey(text, key);
  if (!found || text.charCodeAt(found.valueStart) !== QUOTE) return buf;
  const close = stringEnd(text, found.valueStart);
  if (close === -1) return buf;
  const end = close + 1;
  // Already the replacement (the usual case: the upstream's name is the public one).
  if (end - found.valueStart === replacement.bytes.length && text.startsWith(replacement.text, found.valueStart)) return buf;
  return Buffer.concat([buf.subarray(0, found.valueStart), replacement.bytes, buf.subarray(end)]);
}

/**
 * Removes every `"name": null` member (with its comma), e.g. the `"usage":null` a client did not ask
 * for: one pass over the text, one copy of what is kept, whatever the number of members removed.
 */
export function removeNullMembers(buf: Buffer, key: ByteToken): Buffer {
  const text = latin1(buf);
  const kept: Buffer[] = [];
  /** End of the last range removed: a comma before it is gone already. */
  let removedTo = 0;
  for (let found = findKey(text, key); found; found = findKey(text, key, found.valueStart)) {
    if (!text.startsWith('null', found.valueStart)) continue;
    let start = found.keyStart;
    let end = found.valueStart + 4;
    let before = start - 1;
    while (isSpace(text.charCodeAt(before))) before--;
    if (text.charCodeAt(before) === COMMA && before >= removedTo) {
      start = before;
    } else {
      // First member (or the comma before it went with the member removed before): take the comma after it instead.
      const after = skipSpaces(text, end);
      if (text.charCodeAt(after) === COMMA) end = after + 1;
    }
    kept.push(buf.subarray(removedTo, Math.max(start, removedTo)));
    removedTo = end;
  }
  if (kept.length === 0) return buf;
  kept.push(buf.subarray(removedTo));
  return Buffer.concat(kept);
}

/** The string value of the first `key` key, decoded, or null. */
export function firstStringValue(buf: Buffer, key: ByteToken): string | null {
  const text = latin1(buf);
  const found = findKey(text, key);
  if (!found || text.charCodeAt(found.valueStart) !== QUOTE) return null;
  const close = stringEnd(text, found.valueStart);
  if (close === -1) return null;
  try {
    return JSON.parse(buf.toString('utf8', found.valueStart, close + 1)) as string;
  } catch {
    return null;
  }
}
