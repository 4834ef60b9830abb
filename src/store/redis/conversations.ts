import type {
  ConversationAppend,
  ConversationRecord,
  ConversationReservation,
  ConversationStore,
  MessagePage,
  MessageRecord,
} from '../conversation-types.js';
import { inOneWrite, type RedisClient } from './connect.js';
import { guard } from './guard.js';
import { TurnBatches } from './turn-batches.js';
import { RECONCILE_LUA } from './usage.js';
import type { KeyNames } from './key-names.js';
import { luaScript } from './lua-script.js';

// The scripts' KEYS, ARGV and replies: the head of each .lua file.
const PAGE_SCRIPT = luaScript(new URL('./conversation-page.lua', import.meta.url));
const DELETE_SCRIPT = luaScript(new URL('./delete-conversation.lua', import.meta.url));
/** give_back(), release_lapsed(), heal_held(): conversation-reservations.lua, for the scripts below. */
const RESERVATIONS_LUA = luaScript(new URL('./conversation-reservations.lua', import.meta.url));
const APPEND_SCRIPT = luaScript(new URL('./append-conversation.lua', import.meta.url), {}, [RESERVATIONS_LUA]);
const HELD_SCRIPT = luaScript(new URL('./conversation-bytes-held.lua', import.meta.url), {}, [RECONCILE_LUA, RESERVATIONS_LUA]);
const RESERVE_SCRIPT = luaScript(new URL('./reserve-conversation-bytes.lua', import.meta.url), {}, [RECONCILE_LUA, RESERVATIONS_LUA]);
const RELEASE_SCRIPT = luaScript(new URL('./release-conversation-bytes.lua', import.meta.url), {}, [RESERVATIONS_LUA]);
const SET_BOUND_SCRIPT = luaScript(new URL('./set-conversation-bound.lua', import.meta.url));

type Scripted = RedisClient & {
  novaSetConversationBound(project: string, maxBytes: string | number): Promise<number>;
  novaConversationBytesHeld(...args: (string | number)[]): Promise<[number, number]>;
  novaReserveConversationBytes(...args: (string | number)[]): Promise<[number, number, number]>;
  novaReleaseConversationBytes(...args: string[]): Promise<number>;
  novaDeleteConversation(...args: string[]): Promise<number | null>;
  novaAppendConversation(...args: (string | number)[]): Promise<(string | number)[] | null>;
  novaConversationPage(...args: (string | number)[]): Promise<string[] | null>;
};

function recordFrom(fields: Record<string, string>, ttlMs: number, nowMs: number): ConversationRecord | null {
  if (!fields.id) return null;
  return {
    id: fields.id,
    project_id: fields.project_id!,
    model: fields.model ?? '',
    created_at: fields.created_at!,
    updated_at: fields.updated_at ?? fields.created_at!,
    message_count: Number(fields.message_count ?? 0),
    bytes: Number(fields.bytes ?? 0),
    expires_at: new Date(nowMs + Math.max(0, ttlMs)).toISOString(),
  };
}

const newList = (): PendingAppend[] => [];
/** Most appends in one batch, so that no batch grows without bound; a full one leaves at once. */
const MAX_APPENDS_PER_BATCH = 128;
/** One batch for every project: the write is shared, and on Cluster each command goes to its node. */
const ALL_PROJECTS = '';

interface PendingAppend {
  args: (string | number)[];
  resolve: (reply: (string | number)[] | null) => void;
  reject: (error: unknown) => void;
}

export class RedisConversationStore implements ConversationStore {
  private readonly redis: Scripted;
  /** Appends waiting for the end of the current event-loop turn (see sendAppend). */
  private readonly appends = new TurnBatches<PendingAppend[]>(
    (appends) => this.sendAppends(appends),
    (closing) => inOneWrite(this.redis, closing),
  );
  /** held() reads of the current event-loop turn, by project and bound: shared, then forgotten. */
  private readonly heldReads = new TurnBatches<Promise<{ bytes: number; maxBytes: number }>>(() => undefined);

  constructor(
    redis: RedisClient,
    private readonly keys: KeyNames,
  ) {
    redis.defineCommand('novaAppendConversation', { numberOfKeys: 8, lua: APPEND_SCRIPT });
    redis.defineCommand('novaConversationPage', { numberOfKeys: 3, lua: PAGE_SCRIPT });
    redis.defineCommand('novaDeleteConversation', { numberOfKeys: 6, lua: DELETE_SCRIPT });
    redis.defineCommand('novaConversationBytesHeld', { numberOfKeys: 7, lua: HELD_SCRIPT });
    redis.defineCommand('novaReserveConversationBytes', { numberOfKeys: 7, lua: RESERVE_SCRIPT });
    redis.defineCommand('novaReleaseConversationBytes', { numberOfKeys: 3, lua: RELEASE_SCRIPT });
    redis.defineCommand('novaSetConversationBound', { numberOfKeys: 1, lua: SET_BOUND_SCRIPT });
    this.redis = redis as Scripted;
  }

  private keysOf(projectId: string, conversationId: string): [string, string, string] {
    return [
      this.keys.conversation(projectId, conversationId),
      this.keys.conversationMessages(projectId, conversationId),
      this.keys.conversationPositions(projectId, conversationId),
    ];
  }

  /**
   * The project's conversation bytes held and its reservations (conversation-reservations.lua):
   * beside the held key, so in its hash-tag slot.
   */
  private heldKeysOf(projectId: string): [string, string, string] {
    const held = this.keys.conversationBytesHeld(projectId);
    return [held, `${held}:reservations`, `${held}:reserved`];
  }

  async get(projectId: string, conversationId: string): Promise<ConversationRecord | null> {
    const key = this.keys.conversation(projectId, conversationId);
    const [fields, ttl] = await guard(Promise.all([this.redis.hgetall(key), this.redis.pttl(key)]));
    return recordFrom(fields, ttl, Date.now());
  }

  async append(append: ConversationAppend): Promise<ConversationRecord | null> {
    const pairs: string[] = [];
    let bytes = 0;
    for (const message of append.messages) {
      const json = JSON.stringify(message);
      bytes += Buffer.byteLength(json);
      pairs.push(message.id, json);
    }
    const reply = await this.sendAppend([
      ...this.keysOf(append.projectId, append.conversationId),
      this.keys.usageStorageExpiry(append.projectId),
      this.keys.usageStorageSizes(append.projectId),
      ...this.heldKeysOf(append.projectId),
      JSON.stringify({
        existing: append.existing,
        projectId: append.projectId,
        conversationId: append.conversationId,
        model: append.model,
        now: new Date(append.nowMs).toISOString(),
        retentionSeconds: append.retentionSeconds,
        bytes,
        reservation: append.reservationId ?? '',
      }),
      ...pairs,
    ]);
    if (!reply) return null;
    const fields: Record<string, string> = {};
    for (let i = 0; i < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1]);
    return recordFrom(fields, Number(fields.ttl_ms), append.nowMs);
  }

  /**
   * The appends of one event-loop turn leave together, in one write: each
   * command written alone costs a system call (no auto-pipelining, see connect.ts), and a busy
   * replica stores a conversation per request. Each append keeps its own reply, error and
   * timeout, and their order.
   */
  private sendAppend(args: (string | number)[]): Promise<(string | number)[] | null> {
    const turn = this.appends.of(ALL_PROJECTS, newList, undefined);
    const stored = new Promise<(string | number)[] | null>((resolve, reject) => turn.push({ args, resolve, reject }));
    if (turn.length >= MAX_APPENDS_PER_BATCH) this.appends.closeNow(ALL_PROJECTS);
    return stored;
  }

  private sendAppends(appends: PendingAppend[]): void {
    for (const { args, resolve, reject } of appends) guard(this.redis.novaAppendConversation(...args)).then(resolve, reject);
  }

  async messages(projectId: string, conversationId: string, afterId: string | null, limit: number): Promise<MessagePage | null> {
    const reply = await guard(this.redis.novaConversationPage(...this.keysOf(projectId, conversationId), afterId ?? '', limit));
    if (reply === null) return null;
    const items = reply.map((json) => JSON.parse(json) as MessageRecord);
    return { data: items.slice(0, limit), hasMore: items.length > limit };
  }

  async delete(projectId: string, conversationId: string): Promise<number | null> {
    const bytes = await guard(
      this.redis.novaDeleteConversation(
        ...this.keysOf(projectId, conversationId),
        this.keys.usageStorageExpiry(projectId),
        this.keys.usageStorageSizes(projectId),
        this.keys.conversationBytesHeld(projectId),
        conversationId,
      ),
    );
    return bytes === null ? null : Number(bytes);
  }

  /**
   * The requests of one project that ask within the same event-loop turn share one read: as if
   * they had all asked at the same instant (a conversation stored meanwhile shows in the next
   * turn's read). A report only: admission to the bound is reserve(), which never shares.
   */
  held(projectId: string, defaultMaxBytes: number): Promise<{ bytes: number; maxBytes: number }> {
    return this.heldReads.of(`${projectId}\u0000${defaultMaxBytes}`, () => this.readHeld(projectId, defaultMaxBytes), undefined);
  }

  private async readHeld(projectId: string, defaultMaxBytes: number): Promise<{ bytes: number; maxBytes: number }> {
    const [bytes, maxBytes] = await guard(
      this.redis.novaConversationBytesHeld(
        this.keys.project(projectId),
        this.keys.usageStorage(projectId),
        this.keys.usageStorageExpiry(projectId),
        this.keys.usageStorageSizes(projectId),
        ...this.heldKeysOf(projectId),
        defaultMaxBytes,
      ),
    );
    return { bytes: Number(bytes), maxBytes: Number(maxBytes) };
  }

  async reserve(projectId: string, reservation: ConversationReservation, defaultMaxBytes: number): Promise<{ reserved: boolean; bytes: number; maxBytes: number }> {
    const [reserved, bytes, maxBytes] = await guard(
      this.redis.novaReserveConversationBytes(
        this.keys.project(projectId),
        this.keys.usageStorage(projectId),
        this.keys.usageStorageExpiry(projectId),
        this.keys.usageStorageSizes(projectId),
        ...this.heldKeysOf(projectId),
        defaultMaxBytes,
        reservation.id,
        reservation.bytes,
        reservation.ttlMs,
      ),
    );
    return { reserved: Number(reserved) === 1, bytes: Number(bytes), maxBytes: Number(maxBytes) };
  }

  async release(projectId: string, reservationId: string): Promise<void> {
    await guard(this.redis.novaReleaseConversationBytes(...this.heldKeysOf(projectId), reservationId));
  }

  async setMaxBytes(projectId: string, maxBytes: number | null): Promise<boolean> {
    const done = await guard(this.redis.novaSetConversationBound(this.keys.project(projectId), maxBytes === null ? '' : maxBytes));
    return Number(done) === 1;
  }
}
