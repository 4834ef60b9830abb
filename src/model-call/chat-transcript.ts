import { parseEventData } from './sse-relay.js';
import type { ChatMessage } from './upstream-body.js';

const LF = 0x0a;
const CR = 0x0d;

interface ToolCallDelta {
  index?: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

/** Members of an object up to a key, when none of them is an object or array and no string has an escape. */
const FLAT_MEMBERS = String.raw`(?:[^"{}\[\]]|"[^"\\]*")*?`;
const CHOICES = String.raw`^data: ?\{${FLAT_MEMBERS}"choices"\s*:\s*\[\s*\{${FLAT_MEMBERS}"delta"\s*:\s*\{`;
/**
 * `choices[0].delta.content` of a chat chunk, as the literal's inside: the first choice of the
 * top-level `choices`, its direct `delta`, that object's direct `content`, in a delta with no nested
 * member (no tool calls). Each part matches only flat members around the key it looks for, so it
 * cannot step into or out of an object; the alternatives start with different characters, so the
 * match is linear in the event's length.
 */
const TEXT_DELTA = new RegExp(String.raw`${CHOICES}${FLAT_MEMBERS}"content"\s*:\s*"((?:[^"\\]|\\.)*)"${FLAT_MEMBERS}\}`);
/** The same first delta, flat and without text (a role, a finish chunk's `{}`, a null content). */
const FLAT_DELTA = new RegExp(String.raw`${CHOICES}${FLAT_MEMBERS}\}`);

/**
 * The text a chat chunk adds, read without parsing it for the common events: '' when it has no
 * `"delta"` at all (the usage chunk, `[DONE]`) or a flat first delta without text, the text of a
 * one-line chunk whose first delta is flat. null for any other event (tool calls, several data
 * lines, nested members), which is then parsed whole. Keys are matched as written: a key spelt
 * with escapes (`"\u0064elta"`) is not recognised, as in the relay's reads of `usage` and `model`.
 */
function textOfChunk(event: Buffer): string | null {
  const text = event.toString('utf8');
  if (!text.includes('"delta"')) return '';
  // One line, then only line ends (its own and the blank line's, CRLF, LF or CR): else parsed.
  let lineEnd = text.length;
  while (lineEnd > 0 && (text.charCodeAt(lineEnd - 1) === LF || text.charCodeAt(lineEnd - 1) === CR)) lineEnd--;
  const lf = text.indexOf('\n');
  const cr = text.indexOf('\r');
  if ((lf !== -1 && lf < lineEnd) || (cr !== -1 && cr < lineEnd)) return null;
  const literal = TEXT_DELTA.exec(text)?.[1];
  if (literal === undefined) return FLAT_DELTA.test(text) ? '' : null;
  if (!literal.includes('\\')) return literal;
  try {
    return JSON.parse(`"${literal}"`) as string;
  } catch {
    return null;
  }
}

/**
 * The assistant message of a chat stream, assembled from its chunks (text and tool calls) to be
 * stored. Most chunks carry a little text or none: they are read as text; the others are parsed.
 */
export class ChatTranscript {
  private content = '';
  private readonly toolCalls: { id?: string; type: string; function: { name: string; arguments: string } }[] = [];

  readonly onEvent = (event: Buffer): void => {
    const text = textOfChunk(event);
    if (text !== null) {
      this.content += text;
      return;
    }
    const choice = (parseEventData(event)?.choices as { delta?: Record<string, unknown> }[] | undefined)?.[0];
    const delta = choice?.delta;
    if (!delta) return;
    if (typeof delta.content === 'string') this.content += delta.content;
    if (!Array.isArray(delta.tool_calls)) return;
    for (const part of delta.tool_calls as ToolCallDelta[]) {
      const call = (this.toolCalls[part.index ?? 0] ??= { type: 'function', function: { name: '', arguments: '' } });
      if (part.id) call.id = part.id;
      if (part.type) call.type = part.type;
      if (part.function?.name) call.function.name += part.function.name;
      if (part.function?.arguments) call.function.arguments += part.function.arguments;
    }
  };

  message(): ChatMessage {
    const toolCalls = this.toolCalls.filter(Boolean);
    if (toolCalls.length === 0) return { role: 'assistant', content: this.content };
    return { role: 'assistant', content: this.content === '' ? null : this.content, tool_calls: toolCalls };
  }
}
