import { tokensOf, type ReportedUsage } from '../../core/operations.js';
import { upstreamError } from '../../http/errors.js';
import { messageIdOf, toolUseIdOf } from './message-ids.js';
import { messagesUsageOf } from './messages-usage.js';
import { isRecord, type Json } from './records.js';
import { stopOf } from './stop-reason.js';

/** A message's `content` as text: a string, or the text of a list of parts (some servers send one). */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) if (isRecord(part) && typeof part.text === 'string') text += part.text;
  return text;
}

/**
 * A tool call's arguments as the tool_use block's `input`. Arguments that are not a JSON object
 * (cut short, or not JSON) become {}: `input` must be an object, and an agent then answers the
 * model with the tool's own error about missing fields, so the model can call again.
 */
function inputOf(args: unknown): unknown {
  if (isRecord(args)) return args;
  if (typeof args !== 'string' || args === '') return {};
  try {
    const input: unknown = JSON.parse(args);
    return isRecord(input) ? input : {};
  } catch {
    return {};
  }
}

function toolUsesOf(calls: unknown): Json[] {
  const blocks: Json[] = [];
  if (!Array.isArray(calls)) return blocks;
  for (const call of calls) {
    if (!isRecord(call)) continue;
    const fn = isRecord(call.function) ? call.function : {};
    const name = typeof fn.name === 'string' ? fn.name : '';
    blocks.push({ type: 'tool_use', id: toolUseIdOf(call.id), name, input: inputOf(fn.arguments) });
  }
  return blocks;
}

/**
 * A chat completion (JSON) as a Messages answer naming `publicModel`: reasoning (vLLM's
 * `reasoning_content`, or `reasoning`) as a thinking block with an empty signature, the text,
 * then each tool call as a tool_use block. `usage` is what the upstream reported, for metering.
 */
export function messagesReplyOf(chat: unknown, publicModel: string): { reply: Record<string, unknown>; usage: ReportedUsage } {
  if (!isRecord(chat) || !Array.isArray(chat.choices)) throw upstreamError('The model backend sent a reply without choices.');
  const choice = isRecord(chat.choices[0]) ? chat.choices[0] : {};
  const message = isRecord(choice.message) ? choice.message : {};
  const content: Json[] = [];
  const reasoning = message.reasoning_content ?? message.reasoning;
  if (typeof reasoning === 'string' && reasoning !== '') content.push({ type: 'thinking', thinking: reasoning, signature: '' });
  const text = textOf(message.content);
  if (text !== '') content.push({ type: 'text', text });
  const refusal = typeof message.refusal === 'string' && message.refusal !== '';
  if (refusal) content.push({ type: 'text', text: message.refusal });
  const toolUses = toolUsesOf(message.tool_calls);
  for (const block of toolUses) content.push(block);
  const stop = stopOf(choice, toolUses.length > 0, refusal);
  const usage = tokensOf(chat.usage);
  const reply: Json = {
    id: messageIdOf(chat.id),
    type: 'message',
    role: 'assistant',
    model: publicModel,
    content,
    stop_reason: stop.reason,
    stop_sequence: stop.sequence,
    usage: messagesUsageOf(usage),
  };
  return { reply, usage };
}
