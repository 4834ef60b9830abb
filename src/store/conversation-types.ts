/** Conversations: stored chat history of a project, kept for a retention period after the last write. */

/** A stored message: the message as the client (or the upstream, for replies) wrote it, tool calls included, with an id and time. */
export interface MessageRecord {
  id: string;
  role: string;
  content?: unknown;
  created_at: string;
  [field: string]: unknown;
}

export interface ConversationRecord {
  id: string;
  project_id: string;
  model: string;
  created_at: string;
  updated_at: string;
  message_count: number;
  /** Bytes of the stored messages (their JSON), what storage usage counts. */
  bytes: number;
  /** When the conversation is deleted unless written to again. */
  expires_at: string;
}

export interface MessagePage {
  data: MessageRecord[];
  hasMore: boolean;
}

export interface ConversationAppend {
  projectId: string;
  conversationId: string;
  model: string;
  /** true: the conversation must exist already (a continuation); false: it is created. */
  existing: boolean;
  messages: MessageRecord[];
  nowMs: number;
  retentionSeconds: number;
  /** The reservation (ConversationStore.reserve) this write turns into the stored size; absent: none was made. */
  reservationId?: string;
}

/** Room asked for before an exchange that will be stored (ConversationStore.reserve). */
export interface ConversationReservation {
  /** Unique per request: releasing or converting it twice has no effect. */
  id: string;
  bytes: number;
  /** Given back by itself after this long if it is neither converted nor released (a replica that died). */
  ttlMs: number;
}

export interface ConversationStore {
  get(projectId: string, conversationId: string): Promise<ConversationRecord | null>;
  /**
   * Appends messages in order and renews the retention of the whole conversation, atomically; the
   * write's reservation, if any, becomes the messages' stored size (which counts even past the bound).
   * Returns the updated record, or null when `existing` was set and the conversation is gone (its
   * reservation is then given back).
   */
  append(append: ConversationAppend): Promise<ConversationRecord | null>;
  /**
   * Messages oldest first, starting after the message `afterId` (null: from the first).
   * Returns null when `afterId` is not a message of this conversation.
   */
  messages(projectId: string, conversationId: string, afterId: string | null, limit: number): Promise<MessagePage | null>;
  /**
   * The bytes the project's live conversations and live reservations hold (what expired is freed first) and the
   * project's bound on them (its own, set by the admin API, else `defaultMaxBytes`).
   */
  held(projectId: string, defaultMaxBytes: number): Promise<{ bytes: number; maxBytes: number }>;
  /**
   * Adds the reservation's bytes to what the project holds if that stays within its bound, in one
   * step (no check-then-write race between replicas); else changes nothing. `bytes` is what is held
   * after it (refused: before it), reservations of exchanges in flight included.
   */
  reserve(projectId: string, reservation: ConversationReservation, defaultMaxBytes: number): Promise<{ reserved: boolean; bytes: number; maxBytes: number }>;
  /** Gives a reservation back (nothing was stored); a no-op when it was converted, released or lapsed. */
  release(projectId: string, reservationId: string): Promise<void>;
  /** Sets the project's own bound (null: back to the default); false when there is no such project. */
  setMaxBytes(projectId: string, maxBytes: number | null): Promise<boolean>;
  /** Deletes a conversation with its messages, atomically; returns the bytes it held, or null when there was none. */
  delete(projectId: string, conversationId: string): Promise<number | null>;
}

/** The stored size of messages: what the storage measure of usage counts. */
export function storedBytes(messages: MessageRecord[]): number {
  let bytes = 0;
  for (const message of messages) bytes += Buffer.byteLength(JSON.stringify(message));
  return bytes;
}
