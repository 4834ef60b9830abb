import type {
  ConversationAppend,
  ConversationRecord,
  ConversationReservation,
  ConversationStore,
  MessagePage,
  MessageRecord,
} from '../conversation-types.js';
import { storedBytes } from '../conversation-types.js';

interface StoredConversation {
  record: ConversationRecord;
  messages: MessageRecord[];
  positions: Map<string, number>;
  expiresAtMs: number;
}

const SWEEP_INTERVAL_MS = 60_000;
const clone = <T>(value: T): T => structuredClone(value);

/** In-process conversations; expired ones are dropped on access and by a sweep on writes. */
export class MemoryConversationStore implements ConversationStore {
  private readonly byKey = new Map<string, StoredConversation>();
  /** Projects' own bounds on stored bytes (set by the admin API). */
  private readonly bounds = new Map<string, number>();
  /** Room reserved for exchanges in flight, by project and reservation id (see ConversationStore.reserve). */
  private readonly reservations = new Map<string, Map<string, { bytes: number; deadlineMs: number }>>();
  private lastSweepMs = 0;

  constructor(
    private readonly now: () => number = Date.now,
    /** Told of every write: its bytes and the conversation's new expiry (usage frees the bytes then). */
    private readonly onStored: (projectId: string, conversationId: string, bytes: number, expiresAtMs: number) => void = () => undefined,
    /** Told of a deletion: the caller frees the bytes, so expiry must not free them again. */
    private readonly onDeleted: (projectId: string, conversationId: string) => void = () => undefined,
    private readonly projectExists: (projectId: string) => boolean = () => true,
  ) {}

  async get(projectId: string, conversationId: string): Promise<ConversationRecord | null> {
    const stored = this.live(projectId, conversationId);
    return stored ? clone(stored.record) : null;
  }

  async append(append: ConversationAppend): Promise<ConversationRecord | null> {
    this.sweep(append.nowMs);
    // Stored or not, the reservation leaves: the messages' size replaces it (counted even past the bound).
    if (append.reservationId !== undefined) this.drop(append.projectId, append.reservationId);
    const key = `${append.projectId}/${append.conversationId}`;
    let stored = this.live(append.projectId, append.conversationId);
    if (!stored && append.existing) return null;
    const at = new Date(append.nowMs).toISOString();
    if (!stored) {
      stored = {
        record: {
          id: append.conversationId,
          project_id: append.projectId,
          model: append.model,
          created_at: at,
          updated_at: at,
          message_count: 0,
          bytes: 0,
          expires_at: at,
        },
        messages: [],
        positions: new Map(),
        expiresAtMs: 0,
      };
      this.byKey.set(key, stored);
    }
    for (const message of append.messages) {
      stored.positions.set(message.id, stored.messages.length);
      stored.messages.push(clone(message));
    }
    stored.expiresAtMs = append.nowMs + append.retentionSeconds * 1000;
    this.onStored(append.projectId, append.conversationId, storedBytes(append.messages), stored.expiresAtMs);
    Object.assign(stored.record, {
      model: append.model,
      updated_at: at,
      message_count: stored.messages.length,
      bytes: stored.record.bytes + storedBytes(append.messages),
      expires_at: new Date(stored.expiresAtMs).toISOString(),
    });
    return clone(stored.record);
  }

  async messages(projectId: string, conversationId: string, afterId: string | null, limit: number): Promise<MessagePage | null> {
    const stored = this.live(projectId, conversationId);
    if (!stored) return { data: [], hasMore: false };
    let start = 0;
    if (afterId !== null) {
      const position = stored.positions.get(afterId);
      if (position === undefined) return null;
      start = position + 1;
    }
    const data = stored.messages.slice(start, start + limit).map(clone);
    return { data, hasMore: start + limit < stored.messages.length };
  }

  async delete(projectId: string, conversationId: string): Promise<number | null> {
    const stored = this.live(projectId, conversationId);
    if (!stored) return null;
    this.byKey.delete(`${projectId}/${conversationId}`);
    this.onDeleted(projectId, conversationId);
    return stored.record.bytes;
  }

  async held(projectId: string, defaultMaxBytes: number): Promise<{ bytes: number; maxBytes: number }> {
    return { bytes: this.bytesHeld(projectId), maxBytes: this.bounds.get(projectId) ?? defaultMaxBytes };
  }

  async reserve(projectId: string, reservation: ConversationReservation, defaultMaxBytes: number): Promise<{ reserved: boolean; bytes: number; maxBytes: number }> {
    const maxBytes = this.bounds.get(projectId) ?? defaultMaxBytes;
    const held = this.bytesHeld(projectId);
    if (held + reservation.bytes > maxBytes) return { reserved: false, bytes: held, maxBytes };
    let own = this.reservations.get(projectId);
    if (!own) this.reservations.set(projectId, (own = new Map()));
    if (own.has(reservation.id)) return { reserved: true, bytes: held, maxBytes };
    own.set(reservation.id, { bytes: reservation.bytes, deadlineMs: this.now() + reservation.ttlMs });
    return { reserved: true, bytes: held + reservation.bytes, maxBytes };
  }

  async release(projectId: string, reservationId: string): Promise<void> {
    this.drop(projectId, reservationId);
  }

  private drop(projectId: string, reservationId: string): void {
    const own = this.reservations.get(projectId);
    if (own?.delete(reservationId) && own.size === 0) this.reservations.delete(projectId);
  }

  /** Live conversations and live reservations; lapsed reservations are dropped on the way. */
  private bytesHeld(projectId: string): number {
    const now = this.now();
    let bytes = 0;
    for (const [key, stored] of this.byKey) {
      if (key.startsWith(`${projectId}/`) && stored.expiresAtMs > now) bytes += stored.record.bytes;
    }
    const own = this.reservations.get(projectId);
    for (const [id, reservation] of own ?? []) {
      if (reservation.deadlineMs <= now) own!.delete(id);
      else bytes += reservation.bytes;
    }
    if (own?.size === 0) this.reservations.delete(projectId);
    return bytes;
  }

  async setMaxBytes(projectId: string, maxBytes: number | null): Promise<boolean> {
    if (!this.projectExists(projectId)) return false;
    if (maxBytes === null) this.bounds.delete(projectId);
    else this.bounds.set(projectId, maxBytes);
    return true;
  }

  forgetProject(projectId: string): void {
    this.bounds.delete(projectId);
    this.reservations.delete(projectId);
    for (const key of this.byKey.keys()) if (key.startsWith(`${projectId}/`)) this.byKey.delete(key);
  }

  private live(projectId: string, conversationId: string): StoredConversation | undefined {
    const key = `${projectId}/${conversationId}`;
    const stored = this.byKey.get(key);
    if (stored && stored.expiresAtMs <= this.now()) {
      this.byKey.delete(key);
      return undefined;
    }
    return stored;
  }

  private sweep(nowMs: number): void {
    if (nowMs - this.lastSweepMs < SWEEP_INTERVAL_MS) return;
    this.lastSweepMs = nowMs;
    for (const [key, stored] of this.byKey) if (stored.expiresAtMs <= nowMs) this.byKey.delete(key);
  }
}
