import { ByteToken, latin1, lastObjectValue, replaceStringValue } from '../core/json-bytes.js';
import { readBounded, type Attempt } from './upstream-call.js';
import type { UpstreamResponse } from './upstream-response.js';
import { mapUpstreamFailure } from './upstream-errors.js';
import type { ModelCall } from './model-call.js';

const USAGE_KEY = ByteToken.quoted('usage');
const MODEL_KEY = ByteToken.quoted('model');

/** The whole upstream reply, bounded by `upstream.max_json_reply_bytes`; a client abort stays an abort. */
export async function readReply(call: ModelCall, response: UpstreamResponse): Promise<Buffer> {
  return (response.whole ?? readBounded(response.body, call.ctx.config.upstream.max_json_reply_bytes)).catch((error: unknown) => {
    throw call.signal.aborted ? error : mapUpstreamFailure(error);
  });
}

export interface JsonRelayOptions {
  /** Sees the reply before it is sent (a Responses API id to claim for the project). */
  onReply?: (bytes: Buffer) => Promise<void>;
}

/**
 * An OpenAI-shaped JSON reply (completions, embeddings, responses) passed through as the upstream
 * sent it, without parsing it whole: the usage object is read from its bytes and the model name
 * is rewritten in place to the public id.
 */
export async function relayJson(
  call: ModelCall,
  { response, attempt }: { response: UpstreamResponse; attempt: Attempt },
  options: JsonRelayOptions = {},
): Promise<unknown> {
  const bytes = await readReply(call, response);
  call.observeUpstream(attempt, String(response.status));
  const text = latin1(bytes);
  const usage = call.operation.usageOf(lastObjectValue(bytes, USAGE_KEY, text));
  const out = replaceStringValue(bytes, MODEL_KEY, call.answerModel, text);
  await options.onReply?.(out);
  call.ctx.metrics.modelTraffic.timeToFirstByte.observe({ gen_ai_request_model: call.model.id, stream: 'false' }, call.reply.elapsedTime / 1000);
  call.finish({ outcome: 'completed', usage, storageBytes: 0, attempt });
  call.reply.header('content-type', response.headers['content-type'] ?? 'application/json');
  return call.reply.send(out);
}
