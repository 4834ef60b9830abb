import { Readable } from 'node:stream';
import { randomBase62 } from '../core/ids.js';
import { textOf, type ChatMessage } from './upstream-body.js';
import type { UpstreamResponse } from './upstream-response.js';

const words = (text: string) => text.split(/(?<=\s)(?=\S)/).filter(Boolean);

/**
 * The built-in `echo` model: answers locally with the last user message, word by word when
 * streaming, and reports usage (one token a word), like an OpenAI-compatible backend would.
 */
export function echoResponse(body: Record<string, unknown>, publicModel: string): UpstreamResponse {
  const messages = (Array.isArray(body.messages) ? body.messages : []) as ChatMessage[];
  const lastUser = [...messages].reverse().find((message) => message.role === 'user');
  const pieces = words(textOf(lastUser?.content ?? ''));
  let promptTokens = 0;
  for (const message of messages) promptTokens += words(textOf(message.content)).length;
  const usage = { prompt_tokens: promptTokens, completion_tokens: pieces.length, total_tokens: promptTokens + pieces.length };
  const id = `chatcmpl-echo${randomBase62(20)}`;
  const created = Math.floor(Date.now() / 1000);

  if (body.stream !== true) {
    const completion = {
      id,
      object: 'chat.completion',
      created,
      model: publicModel,
      choices: [{ index: 0, message: { role: 'assistant', content: pieces.join('') }, finish_reason: 'stop' }],
      usage,
    };
    return { status: 200, headers: { 'content-type': 'application/json' }, body: Readable.from([Buffer.from(JSON.stringify(completion))]) };
  }

  const includeUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
  const head = `{"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(publicModel)},"choices":`;
  const tail = includeUsage ? ',"usage":null}' : '}';
  const event = (choices: string) => Buffer.from(`data: ${head}${choices}${tail}\n\n`);
  async function* events() {
    yield event('[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]');
    for (const piece of pieces) {
      yield event(`[{"index":0,"delta":{"content":${JSON.stringify(piece)}},"finish_reason":null}]`);
    }
    yield event('[{"index":0,"delta":{},"finish_reason":"stop"}]');
    if (includeUsage) yield Buffer.from(`data: ${head}[],"usage":${JSON.stringify(usage)}}\n\n`);
    yield Buffer.from('data: [DONE]\n\n');
  }
  return { status: 200, headers: { 'content-type': 'text/event-stream' }, body: Readable.from(events(), { objectMode: false }) };
}
