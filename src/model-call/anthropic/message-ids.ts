import { randomBase62 } from '../../core/ids.js';

const NOT_BASE62 = /[^0-9A-Za-z]/g;
const CHAT_PREFIX = 'chatcmpl-';

/**
 * The Messages id of the message answering a chat completion: `msg_` and the letters and digits of
 * the completion's id (its `chatcmpl-` prefix left out), so logs of both shapes share one id; a
 * random one when the upstream sent none.
 */
export function messageIdOf(chatId: unknown): string {
  if (typeof chatId === 'string') {
    const tail = (chatId.startsWith(CHAT_PREFIX) ? chatId.slice(CHAT_PREFIX.length) : chatId).replace(NOT_BASE62, '').slice(0, 64);
    if (tail !== '') return `msg_${tail}`;
  }
  return `msg_${randomBase62(24)}`;
}

/**
 * A tool_use block's id: the upstream's tool call id as sent, since the client hands it back in
 * `tool_result.tool_use_id` and it goes upstream again as `tool_call_id`; minted when missing.
 */
export function toolUseIdOf(callId: unknown): string {
  return typeof callId === 'string' && callId !== '' ? callId : `toolu_${randomBase62(24)}`;
}
