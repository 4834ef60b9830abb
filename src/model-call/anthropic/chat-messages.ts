import { invalidParameter } from '../../http/errors.js';
import { isRecord, type Json } from './records.js';

/** The image types OpenAI's `image_url` parts take (and vLLM, Ollama, llama.cpp decode). */
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

type ChatPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

const unsupported = (path: string, type: string) =>
  invalidParameter(
    `${path}.type: content blocks of type "${type}" cannot be sent to this model: it is served through an OpenAI-compatible API that has no form for them.`,
    `${path}.type`,
  );

function stringAt(block: Json, field: string, path: string): string {
  const value = block[field];
  if (typeof value !== 'string') throw invalidParameter(`${path}.${field}: Input should be a valid string`, `${path}.${field}`);
  return value;
}

function blockAt(blocks: unknown[], index: number, path: string): Json & { type: string } {
  const block = blocks[index];
  if (!isRecord(block) || typeof block.type !== 'string') {
    throw invalidParameter(`${path}: Input should be a content block object with a "type"`, path);
  }
  return block as Json & { type: string };
}

/** An image block as an `image_url` part: base64 data as a data URL, a URL as it is. */
function imagePartOf(block: Json, path: string): ChatPart {
  const source = block.source;
  if (!isRecord(source)) throw invalidParameter(`${path}.source: Input should be an object`, `${path}.source`);
  if (source.type === 'url') return { type: 'image_url', image_url: { url: stringAt(source, 'url', `${path}.source`) } };
  if (source.type !== 'base64') {
    throw invalidParameter(`${path}.source.type: only "base64" and "url" image sources can be sent to this model`, `${path}.source.type`);
  }
  const mediaType = source.media_type;
  if (typeof mediaType !== 'string' || !IMAGE_TYPES.has(mediaType)) {
    throw invalidParameter(
      `${path}.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'`,
      `${path}.source.media_type`,
    );
  }
  return { type: 'image_url', image_url: { url: `data:${mediaType};base64,${stringAt(source, 'data', `${path}.source`)}` } };
}

/** Text parts as one string, joined as vLLM joins the text parts of a message; parts with an image as a list. */
function contentOf(parts: ChatPart[]): string | ChatPart[] {
  let text = '';
  for (let index = 0; index < parts.length; index++) {
    const part = parts[index]!;
    if (part.type !== 'text') return parts;
    text = index === 0 ? part.text : `${text}\n${part.text}`;
  }
  return text;
}

/**
 * A tool_result block as a `tool` message. Its text blocks are joined; its images cannot go in a
 * tool message, so they join `userParts` (the user message that follows the tool messages).
 * `tool_reference` blocks are left out: they point at tools whose definitions, `defer_loading`
 * being dropped, are all sent in full already.
 */
function toolMessageOf(block: Json, path: string, userParts: ChatPart[]): Json {
  const toolCallId = stringAt(block, 'tool_use_id', path);
  let text = '';
  const content = block.content;
  if (typeof content === 'string') text = content;
  else if (Array.isArray(content)) {
    for (let index = 0; index < content.length; index++) {
      const itemPath = `${path}.content[${index}]`;
      const item = blockAt(content, index, itemPath);
      if (item.type === 'text') {
        const itemText = stringAt(item, 'text', itemPath);
        text = text === '' ? itemText : `${text}\n${itemText}`;
      } else if (item.type === 'image') userParts.push(imagePartOf(item, itemPath));
      else if (item.type !== 'tool_reference') throw unsupported(itemPath, item.type);
    }
  } else if (content !== undefined && content !== null) {
    throw invalidParameter(`${path}.content: Input should be a valid string or list`, `${path}.content`);
  }
  if (block.is_error === true) text = text === '' ? 'Error' : `Error: ${text}`;
  return { role: 'tool', tool_call_id: toolCallId, content: text };
}

/** A user turn: its tool results first (they must follow the assistant's tool calls), then the rest. */
function appendUser(blocks: unknown[], path: string, out: Json[]): void {
  const parts: ChatPart[] = [];
  let results = 0;
  for (let index = 0; index < blocks.length; index++) {
    const blockPath = `${path}[${index}]`;
    const block = blockAt(blocks, index, blockPath);
    if (block.type === 'text') parts.push({ type: 'text', text: stringAt(block, 'text', blockPath) });
    else if (block.type === 'image') parts.push(imagePartOf(block, blockPath));
    else if (block.type === 'tool_result') {
      out.push(toolMessageOf(block, blockPath, parts));
      results++;
    } else throw unsupported(blockPath, block.type);
  }
  if (parts.length > 0 || results === 0) out.push({ role: 'user', content: contentOf(parts) });
}

/** An assistant turn: its text, its tool_use blocks as tool_calls; thinking from earlier turns is not sent back. */
function appendAssistant(blocks: unknown[], path: string, out: Json[]): void {
  let text = '';
  const calls: Json[] = [];
  for (let index = 0; index < blocks.length; index++) {
    const blockPath = `${path}[${index}]`;
    const block = blockAt(blocks, index, blockPath);
    if (block.type === 'text') {
      const blockText = stringAt(block, 'text', blockPath);
      text = text === '' ? blockText : `${text}\n${blockText}`;
    } else if (block.type === 'tool_use') {
      const id = stringAt(block, 'id', blockPath);
      const name = stringAt(block, 'name', blockPath);
      calls.push({ id, type: 'function', function: { name, arguments: JSON.stringify(block.input ?? {}) } });
    } else if (block.type !== 'thinking' && block.type !== 'redacted_thinking') throw unsupported(blockPath, block.type);
  }
  const message: Json = { role: 'assistant', content: text };
  if (calls.length > 0) message.tool_calls = calls;
  out.push(message);
}

/** The Messages API's `messages` appended to `out` as chat messages; a role or block it cannot carry is a 400. */
export function appendChatMessages(messages: unknown[], out: Json[]): void {
  for (let index = 0; index < messages.length; index++) {
    const path = `messages[${index}]`;
    const message = messages[index];
    if (!isRecord(message)) throw invalidParameter(`${path}: Input should be an object`, path);
    const { role, content } = message;
    if (role !== 'user' && role !== 'assistant') {
      throw invalidParameter(`${path}.role: Input should be 'user' or 'assistant'`, `${path}.role`);
    }
    if (typeof content === 'string') out.push({ role, content });
    else if (!Array.isArray(content)) {
      throw invalidParameter(`${path}.content: Input should be a valid string or list`, `${path}.content`);
    } else if (role === 'user') appendUser(content, `${path}.content`, out);
    else appendAssistant(content, `${path}.content`, out);
  }
}
