/**
 * Byte-level reads and edits of upstream JSON, for the few fields the gateway touches (`model`,
 * `usage`), so a reply or stream event passes through without being parsed and re-serialised.
 *
 * A key is recognised only where a key can stand: its opening quote follows `{` or `,` (spaces
 * allowed). Inside a JSON string every quote is escaped, so text that merely contains `"model":`
 * is never taken for the key.
 */

import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, COLON, COMMA, OPEN_BRACE, OPEN_BRACKET, QUOTE } from '../json-codes.js';

function isSpace(byte: number | undefined): boolean {
  return byte === 32 || byte === 9 || byte === 10 || byte === 13;
}

function skipSpaces(buf: Buffer, at: number): number {
  while (isSpace(buf[at])) at++;
  return at;
}

/** Index of the closing quote of the JSON string whose opening quote is at `open`, or -1. */
export function stringEnd(buf: Buffer, open: number): number {
  for (let i = open + 1; i < buf.length; i++) {
    const byte = buf[i];
    if (byte === BACKSLASH) i++;
    else if (byte === QUOTE) return i;
  }
  return -1;
}

/** Where a key stands: its opening quote, and where its value starts. */
export interface KeyAt {
  keyStart: number;
  valueStart: number;
}

function keyAt(buf: Buffer, quote: number, keyLength: number): KeyAt | null {
  let before = quote - 1;
  while (before >= 0 && isSpace(buf[before])) before--;
  if (buf[before] !== OPEN_BRACE && buf[before] !== COMMA) return null;
  const colon = skipSpaces(buf, quote + keyLength);
  if (buf[colon] !== COLON) return null;
  return { keyStart: quote, valueStart: skipSpaces(buf, colon + 1) };
}

const latin1Keys = new WeakMap<Buffer, string>();
/** A key's bytes as a latin1 string, made once per key Buffer. */
function latin1Of(key: Buffer): string {
  let text = latin1Keys.get(key);
  if (text === undefined) latin1Keys.set(key, (text = key.toString('latin1')));
  return text;
}

/**
 * The first occurrence of `"name"` as a key, searching from `from`. `quotedKey` is the Buffer of
 * `"name"`. `text`, when the caller has it, is `buf` as a latin1 string (one character per byte, so
 * the same positions): it is searched instead, since a String's indexOf costs a fraction of a
 * Buffer's, which crosses into C++ on every call.
 */
export function findKey(buf: Buffer, quotedKey: Buffer, from = 0, text?: string): KeyAt | null {
  if (text !== undefined) {
    const needle = latin1Of(quotedKey);
    for (let at = text.indexOf(needle, from); at !== -1; at = text.indexOf(needle, at + 1)) {
      const found = keyAt(buf, at, quotedKey.length);
      if (found) return found;
    }
    return null;
  }
  for (let at = buf.indexOf(quotedKey, from); at !== -1; at = buf.indexOf(quotedKey, at + 1)) {
    const found = keyAt(buf, at, quotedKey.length);
    if (found) return found;
  }
  return null;
}

/** Whether `buf` (or its latin1 `text`, see findKey) holds the bytes of `needle`. */
export function holds(buf: Buffer, needle: Buffer, text?: string): boolean {
  return text !== undefined ? text.includes(latin1Of(needle)) : buf.includes(needle);
}

/** The last occurrence of `"name"` as a key. */
export function findLastKey(buf: Buffer, quotedKey: Buffer): KeyAt | null {
  for (let at = buf.lastIndexOf(quotedKey); at !== -1; at = at === 0 ? -1 : buf.lastIndexOf(quotedKey, at - 1)) {
    const found = keyAt(buf, at, quotedKey.length);
    if (found) return found;
  }
  return null;
}

/** End (exclusive) of the object or array that opens at `open`, or -1 when it is not closed in `buf`. */
export function compositeEnd(buf: Buffer, open: number): number {
  let depth = 0;
  for (let i = open; i < buf.length; i++) {
    const byte = buf[i];
    if (byte === QUOTE) {
      i = stringEnd(buf, i);
      if (i === -1) return -1;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      depth++;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** The object value of the last `"name"` key, parsed (a small object such as `usage`), or null. */
export function lastObjectValue(buf: Buffer, quotedKey: Buffer): Record<string, unknown> | null {
  const key = findLastKey(buf, quotedKey);
  if (!key || buf[key.valueStart] !== OPEN_BRACE) return null;
  const end = compositeEnd(buf, key.valueStart);
  if (end === -1) return null;
  try {
    return JSON.parse(buf.toString('utf8', key.valueStart, end)) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/**
 * Replaces the string value of the first `"name"` key with `replacement` (a JSON string literal,
 * quotes included). Returns `buf` itself when the key is absent, not a string, or already equal.
 * `text`: see findKey.
 */
export function replaceStringValue(buf: Buffer, quotedKey: Buffer, replacement: Buffer, text?: string): Buffer {
  const key = findKey(buf, quotedKey, 0, text);
  if (!key || buf[key.valueStart] !== QUOTE) return buf;
  const close = stringEnd(buf, key.valueStart);
  if (close === -1) return buf;
  const end = close + 1;
  if (end - key.valueStart === replacement.length) {
    // Already the replacement (the usual case: the upstream's name is the public one).
    const same = text !== undefined ? text.startsWith(latin1Of(replacement), key.valueStart) : buf.compare(replacement, 0, replacement.length, key.valueStart, end) === 0;
    if (same) return buf;
  }
  return Buffer.concat([buf.subarray(0, key.valueStart), replacement, buf.subarray(end)]);
}

const NULL = Buffer.from('null');

/** Removes every `"name": null` member (with its comma), e.g. the `"usage":null` a client did not ask for. */
export function removeNullMembers(buf: Buffer, quotedKey: Buffer): Buffer {
  let out = buf;
  let from = 0;
  for (;;) {
    const key = findKey(out, quotedKey, from);
    if (!key) return out;
    const valueEnd = key.valueStart + NULL.length;
    if (out.compare(NULL, 0, NULL.length, key.valueStart, valueEnd) !== 0) {
      from = key.valueStart;
      continue;
    }
    let start = key.keyStart;
    let end = valueEnd;
    let before = start - 1;
    while (isSpace(out[before])) before--;
    if (out[before] === COMMA) {
      start = before;
    } else {
      // First member: take the comma after it instead.
      const after = skipSpaces(out, end);
      if (out[after] === COMMA) end = after + 1;
    }
    out = Buffer.concat([out.subarray(0, start), out.subarray(end)]);
    from = start;
  }
}

/** The string value of the first `"name"` key, decoded, or null. */
export function firstStringValue(buf: Buffer, quotedKey: Buffer): string | null {
  const key = findKey(buf, quotedKey);
  if (!key || buf[key.valueStart] !== QUOTE) return null;
  const close = stringEnd(buf, key.valueStart);
  if (close === -1) return null;
  try {
    return JSON.parse(buf.toString('utf8', key.valueStart, close + 1)) as string;
  } catch {
    return null;
  }
}
