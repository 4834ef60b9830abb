import type { FastifyBaseLogger } from 'fastify';
import type { AppContext } from '../app-context.js';
import { invalidParameter, resourceNotFound } from '../http/errors.js';
import { isGatewayId, mintId } from '../http/ids.js';
import { storedBytes, type MessageRecord } from '../store/conversation-types.js';
import type { ChatBody, ChatMessage } from '../upstream/chat-body.js';

/** What a chat completion does with conversations: which one it continues or starts, and its history. */
export interface ConversationPlan {
  /** null: nothing is stored (`store: false` on a new conversation). */
  id: string | null;
  existing: boolean;
  store: boolean;
  history: ChatMessage[];
}

/** Resolves `conversation_id` and `store`: a continuation loads the stored history (404 when it is not the project's). */
export async function planConversation(ctx: AppContext, projectId: string, body: ChatBody): Promise<ConversationPlan> {
  const store = body.store !== false;
  const requested = body.conversation_id;
  if (requested === undefined) return { id: store ? mintId('conv', ctx.now()) : null, existing: false, store, history: [] };
  if (!isGatewayId('conv', requested)) throw resourceNotFound('conversation', 'conversation_id');
  const record = await ctx.store.conversations.get(projectId, requested);
  if (!record) throw resourceNotFound('conversation', 'conversation_id');
  const max = ctx.config.conversations.max_messages;
  if (store && record.message_count + body.messages.length + 1 > max) {
    throw invalidParameter(`The conversation has reached its limit of ${max} messages; start a new one.`, 'conversation_id');
  }
  const page = await ctx.store.conversations.messages(projectId, requested, null, max);
  const history = (page?.data ?? []).map((message) => ({ role: message.role, content: message.content }));
  return { id: requested, existing: true, store, history };
}

/**
 * Stores the request's messages and the assistant reply without holding up the response, and
 * returns the bytes written (what storage usage counts; 0 when nothing is stored). The write is
 * issued before the response is sent, so a read on this replica (same Redis connection, commands in
 * order) sees it; a failed write is logged, not turned into an error: the completion was served.
 */
export function storeExchange(
  ctx: AppContext,
  log: FastifyBaseLogger,
  projectId: string,
  plan: ConversationPlan,
  model: string,
  messages: ChatMessage[],
  reply: string,
): number {
  if (!plan.store || plan.id === null) return 0;
  const conversationId = plan.id;
  const nowMs = ctx.now();
  const at = new Date(nowMs).toISOString();
  const records: MessageRecord[] = messages.map((message) => ({
    id: mintId('msg', nowMs),
    role: message.role,
    content: message.content,
    created_at: at,
  }));
  records.push({ id: mintId('msg', nowMs), role: 'assistant', content: reply, created_at: at });
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
