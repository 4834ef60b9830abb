import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { ModelCallContext } from './model-call-context.js';
import { invalidParameter, resourceNotFound, storageQuotaExceeded } from '../http/errors.js';
import { StoreUnavailableError } from '../store/types.js';
import { isGatewayId, mintId, randomBase62 } from '../core/ids.js';
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
  /**
   * The room reserved in the project's bound for this exchange, until storeExchange hands it to
   * the write (null: none, or handed over already). Given back when the response ends without it.
   */
  reservationId: string | null;
}

/**
 * How long a reservation holds room if nobody converts or gives it back (a replica that died, or
 * lost the store, mid-call). A call still running after it keeps going; its reply still counts
 * when stored, but meanwhile others may reserve its room.
 */
export const RESERVATION_TTL_MS = 60 * 60_000;

/**
 * Resolves `conversation_id` and `store`. Storing is opt-in, as with OpenAI: `store: true`, a
 * continuation, or `conversations.store_default`. A continuation loads the stored history (404
 * when it is not the project's); `store: false` on it reads the history without writing.
 */
export async function planConversation(
  ctx: ModelCallContext,
  projectId: string,
  body: ChatBody,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<ConversationPlan> {
  const requested = body.conversation_id;
  if (requested === undefined || requested === null) {
    const store = body.store === true || (body.store !== false && ctx.config.conversations.store_default);
    const plan: ConversationPlan = { id: store ? mintId('conv', ctx.now()) : null, existing: false, store, history: [], reservationId: null };
    if (store) await reserveRoom(ctx, projectId, plan, request, reply);
    return plan;
  }
  const store = body.store !== false;
  const plan: ConversationPlan = { id: requested, existing: true, store, history: [], reservationId: null };
  if (store) await reserveRoom(ctx, projectId, plan, request, reply);
  if (!isGatewayId('conv', requested)) throw resourceNotFound('conversation', 'conversation_id');
  const record = await ctx.store.conversations.get(projectId, requested);
  if (!record) throw resourceNotFound('conversation', 'conversation_id');
  const max = ctx.config.conversations.max_messages;
  if (store && record.message_count + body.messages.length + 1 > max) {
    throw invalidParameter(`The conversation has reached its limit of ${max} messages; start a new one.`, 'conversation_id');
  }
  const page = await ctx.store.conversations.messages(projectId, requested, null, max);
  plan.history = (page?.data ?? []).map(({ id: _id, created_at: _at, ...message }) => message);
  return plan;
}

/**
 * Refuses to store past the project's bound, before anything is sent upstream: the request's body,
 * by the bytes read (chunked or not), is reserved in the bound in one store step, so concurrent
 * requests on any replica cannot all pass one check. The reply is not known yet: the write counts
 * it even past the bound (the exchanges in flight when the bound is reached), and the next request
 * is refused. A response that ends before storeExchange took the reservation (a refusal, a failed
 * call, a cut stream, a client gone) gives it back. While the store is away the request goes
 * through unreserved (its write fails and is logged).
 */
async function reserveRoom(ctx: ModelCallContext, projectId: string, plan: ConversationPlan, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const id = randomBase62(20);
  let room: { reserved: boolean; maxBytes: number };
  try {
    room = await ctx.store.conversations.reserve(projectId, { id, bytes: request.bodyBytes, ttlMs: RESERVATION_TTL_MS }, ctx.config.conversations.max_bytes_per_project);
  } catch (error) {
    if (error instanceof StoreUnavailableError) return;
    throw error;
  }
  if (!room.reserved) throw storageQuotaExceeded(room.maxBytes);
  plan.reservationId = id;
  const giveBack = () => {
    if (plan.reservationId !== id) return;
    plan.reservationId = null;
    ctx.store.conversations
      .release(projectId, id)
      .catch((error: unknown) => request.log.warn({ err: error }, 'conversation reservation not given back: it lapses by itself'));
  };
  // The connection may have gone while the store answered; then 'close' has been emitted already.
  if (reply.raw.closed || reply.raw.destroyed) giveBack();
  else reply.raw.once('close', giveBack);
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
  // The write converts the reservation (the response's end no longer gives it back).
  const reservationId = plan.reservationId ?? undefined;
  plan.reservationId = null;
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
      reservationId,
    })
    .then(
      (stored) => {
        if (!stored) log.warn({ conversation_id: conversationId }, 'conversation expired before the reply was stored');
      },
      (error: unknown) => {
        log.warn({ err: error, conversation_id: conversationId }, 'conversation not stored: store unavailable');
        // Nothing stored: give the room back (a no-op if the write did land, or when the store is still away: it lapses).
        if (reservationId !== undefined) ctx.store.conversations.release(projectId, reservationId).catch(() => undefined);
      },
    );
  return storedBytes(records);
}

/**
 * The tokens of the stored history a chat continues (its route facts' historyTokens): the stored
 * bytes of the conversation, a bound as the prompt estimate is (src/core/operations.ts). 0 when it
 * continues none, or none the project holds (the handler answers 404), or the store is away.
 */
export async function conversationHistoryTokens(ctx: ModelCallContext, projectId: string, body: unknown): Promise<number> {
  const requested = (body as { conversation_id?: unknown } | null)?.conversation_id;
  if (typeof requested !== 'string' || !isGatewayId('conv', requested)) return 0;
  try {
    return (await ctx.store.conversations.get(projectId, requested))?.bytes ?? 0;
  } catch (error) {
    if (error instanceof StoreUnavailableError) return 0;
    throw error;
  }
}
