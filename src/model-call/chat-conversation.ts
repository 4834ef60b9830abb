import type { FastifyBaseLogger } from 'fastify';
import type { ModelCallContext } from './model-call-context.js';
import { invalidParameter, resourceNotFound, storageQuotaExceeded } from '../http/errors.js';
import { StoreUnavailableError } from '../store/types.js';
import { isGatewayId, mintId } from '../core/ids.js';
import { storedBytes, type MessageRecord } from '../store/conversation-types.js';
import type { ChatMessage } from './upstream-body.js';
import type { ChatBody } from './chat-schema.js';

/** What a chat completion does with conversations: which one it continues or starts, and its history. */
export interface ConversationPlan {
  /** null: nothing is stored and nothing continued. */
  id: string | null;
  existing: boolean;
  store: boolean;
  history: ChatMessage[];
}

/**
 * Resolves `conversation_id` and `store`. Storing is opt-in, as with OpenAI: `store: true`, a
 * continuation, or `conversations.store_default`. A continuation loads the stored history (404
 * when it is not the project's); `store: false` on it reads the history without writing.
 */
export async function planConversation(ctx: ModelCallContext, projectId: string, body: ChatBody, incomingBytes: number): Promise<ConversationPlan> {
  const requested = body.conversation_id;
  if (requested === undefined || requested === null) {
    const store = body.store === true || (body.store !== false && ctx.config.conversations.store_default);
    if (store) await ensureRoom(ctx, projectId, incomingBytes);
    return { id: store ? mintId('conv', ctx.now()) : null, existing: false, store, history: [] };
  }
  const store = body.store !== false;
  if (store) await ensureRoom(ctx, projectId, incomingBytes);
  if (!isGatewayId('conv', requested)) throw resourceNotFound('conversation', 'conversation_id');
  const record = await ctx.store.conversations.get(projectId, requested);
  if (!record) throw resourceNotFound('conversation', 'conversation_id');
  const max = ctx.config.conversations.max_messages;
  if (store && record.message_count + body.messages.length + 1 > max) {
    throw invalidParameter(`The conversation has reached its limit of ${max} messages; start a new one.`, 'conversation_id');
  }
  const page = await ctx.store.conversations.messages(projectId, requested, null, max);
  const history = (page?.data ?? []).map(({ id: _id, created_at: _at, ...message }) => message);
  return { id: requested, existing: true, store, history };
}

/**
 * Refuses to store past the project's bound, before anything is sent upstream. The request's size
 * (its Content-Length) stands for what it adds; the reply is not known yet, so the bound can be
 * passed by the replies of the exchanges in flight when it is reached, and the next is refused.
 * While the store is away the check lets the request through (its write fails and is logged).
 */
async function ensureRoom(ctx: ModelCallContext, projectId: string, incomingBytes: number): Promise<void> {
  let held: { bytes: number; maxBytes: number };
  try {
    held = await ctx.store.conversations.held(projectId, ctx.config.conversations.max_bytes_per_project);
  } catch (error) {
    if (error instanceof StoreUnavailableError) return;
    throw error;
  }
  if (held.bytes + incomingBytes > held.maxBytes) throw storageQuotaExceeded(held.maxBytes);
}

/**
 * Stores the request's messages and the assistant reply (tool calls and tool results included, as
 * written) without holding up the response, and returns the bytes written (what storage usage
 * counts; 0 when nothing is stored). The write is issued before the response is sent, so a read on
 * this replica (same Redis connection, commands in order) sees it; a failed write is logged, not
 * turned into an error: the completion was served.
 */
export function storeExchange(
  ctx: ModelCallContext,
  log: FastifyBaseLogger,
  projectId: string,
  plan: ConversationPlan,
  model: string,
  messages: ChatMessage[],
  reply: ChatMessage,
): number {
  if (!plan.store || plan.id === null) return 0;
  const conversationId = plan.id;
  const nowMs = ctx.now();
  const at = new Date(nowMs).toISOString();
  const records: MessageRecord[] = [...messages, reply].map((message) => ({ ...message, id: mintId('msg', nowMs), created_at: at }));
  ctx.store.conversations
    .append({
      projectId,
      conversationId,
      model,
      existing: plan.existing,
      messages: records,
      nowMs,
      retentionSeconds: ctx.config.conversations.retention_seconds,
    })
    .then(
      (stored) => {
        if (!stored) log.warn({ conversation_id: conversationId }, 'conversation expired before the reply was stored');
      },
      (error: unknown) => log.warn({ err: error, conversation_id: conversationId }, 'conversation not stored: store unavailable'),
    );
  return storedBytes(records);
}
