import type {
  ConversationAppend,
  ConversationRecord,
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
    let bytes = 0;
    for (const [key, stored] of this.byKey) {
      if (key.startsWith(`${projectId}/`) && stored.expiresAtMs > this.now()) bytes += stored.record.bytes;
    }
    return { bytes, maxBytes: this.bounds.get(projectId) ?? defaultMaxBytes };
  }

  async setMaxBytes(projectId: string, maxBytes: number | null): Promise<boolean> {
    if (!this.projectExists(projectId)) return false;
    if (maxBytes === null) this.bounds.delete(projectId);
    else this.bounds.set(projectId, maxBytes);
    return true;
  }

  forgetProject(projectId: string): void {
    this.bounds.delete(projectId);
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
