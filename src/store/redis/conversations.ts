import type {
  ConversationAppend,
  ConversationRecord,
  ConversationStore,
  MessagePage,
  MessageRecord,
} from '../conversation-types.js';
import { inOneWrite, type RedisClient } from './connect.js';
import { guard } from './guard.js';
import { TurnBatches } from './turn-batches.js';
import { RECONCILE_LUA } from './usage.js';
import type { KeyNames } from './key-names.js';

/**
 * KEYS: record (hash), messages (list of JSON), positions (hash message id -> list index),
 * the project's storage expiry index and sizes (usage: frees the bytes when the conversation expires),
 * the conversation bytes the project holds (its bound).
 * ARGV: existing (1/0), project id, conversation id, model, now ISO, retention s, bytes, then (id, json) pairs.
 * Appends in order, renews the TTL of all three keys, returns the record (false when a continuation found nothing).
 */
const APPEND_SCRIPT = `
if ARGV[1] == '1' then
  if redis.call('EXISTS', KEYS[1]) == 0 then return false end
else
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'id', ARGV[3], 'project_id', ARGV[2], 'created_at', ARGV[5], 'message_count', 0, 'bytes', 0)
  end
end
local n = redis.call('LLEN', KEYS[2])
for i = 8, #ARGV, 2 do
  redis.call('RPUSH', KEYS[2], ARGV[i + 1])
  redis.call('HSET', KEYS[3], ARGV[i], n)
  n = n + 1
end
redis.call('HSET', KEYS[1], 'model', ARGV[4], 'updated_at', ARGV[5], 'message_count', n)
redis.call('HINCRBY', KEYS[1], 'bytes', ARGV[7])
redis.call('EXPIRE', KEYS[1], ARGV[6])
redis.call('EXPIRE', KEYS[2], ARGV[6])
redis.call('EXPIRE', KEYS[3], ARGV[6])
-- Redis's own clock, the one its key expiry follows; the usage store frees these bytes by it.
local time = redis.call('TIME')
local expires = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + tonumber(ARGV[6]) * 1000
redis.call('ZADD', KEYS[4], expires, ARGV[3])
redis.call('HINCRBY', KEYS[5], ARGV[3], ARGV[7])
redis.call('INCRBY', KEYS[6], ARGV[7])
redis.call('EXPIRE', KEYS[4], ARGV[6] + 86400)
redis.call('EXPIRE', KEYS[5], ARGV[6] + 86400)
local record = redis.call('HGETALL', KEYS[1])
table.insert(record, 'ttl_ms')
table.insert(record, redis.call('PTTL', KEYS[1]))
return record
`;

/** KEYS: record, messages, positions. ARGV: after id ('' = from the start), limit. Returns {found, messages...}. */
const PAGE_SCRIPT = `
local start = 0
if ARGV[1] ~= '' then
  local position = redis.call('HGET', KEYS[3], ARGV[1])
  if not position then return {0} end
  start = tonumber(position) + 1
end
local limit = tonumber(ARGV[2])
local page = redis.call('LRANGE', KEYS[2], start, start + limit)
table.insert(page, 1, 1)
return page
`;

/**
 * KEYS: record, messages, positions, the project's storage expiry index, sizes and conversation bytes held. ARGV: conversation id.
 * Returns the bytes the conversation held (which the caller frees now, so expiry must not free them
 * again), or false when there was none.
 */
const DELETE_SCRIPT = `
local bytes = redis.call('HGET', KEYS[1], 'bytes')
if not bytes then return false end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
if redis.call('HDEL', KEYS[5], ARGV[1]) == 1 then redis.call('DECRBY', KEYS[6], bytes) end
redis.call('ZREM', KEYS[4], ARGV[1])
return tonumber(bytes)
`;

/**
 * KEYS: project, storage total, expiry index, sizes, conversation bytes held. ARGV: default bound.
 * Frees what expired, then returns {bytes held, the project's bound (its own, else the default)}.
 */
const HELD_SCRIPT = `${RECONCILE_LUA}
reconcile(KEYS[2], KEYS[3], KEYS[4], KEYS[5], 500)
local own = redis.call('HGET', KEYS[1], 'max_conversation_bytes')
return {tonumber(redis.call('GET', KEYS[5]) or '0'), tonumber(own or ARGV[1])}
`;

/** KEYS: project. ARGV: bound ('' = none). Returns 0 when the project does not exist. */
const SET_BOUND_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] == '' then redis.call('HDEL', KEYS[1], 'max_conversation_bytes')
else redis.call('HSET', KEYS[1], 'max_conversation_bytes', ARGV[1]) end
return 1
`;

type Scripted = RedisClient & {
  novaSetConversationBound(project: string, maxBytes: string | number): Promise<number>;
  novaConversationBytesHeld(...args: (string | number)[]): Promise<[number, number]>;
  novaDeleteConversation(...args: string[]): Promise<number | null>;
  novaAppendConversation(...args: (string | number)[]): Promise<(string | number)[] | null>;
  novaConversationPage(...args: (string | number)[]): Promise<(string | number)[]>;
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
    redis.defineCommand('novaAppendConversation', { numberOfKeys: 6, lua: APPEND_SCRIPT });
    redis.defineCommand('novaConversationPage', { numberOfKeys: 3, lua: PAGE_SCRIPT });
    redis.defineCommand('novaDeleteConversation', { numberOfKeys: 6, lua: DELETE_SCRIPT });
    redis.defineCommand('novaConversationBytesHeld', { numberOfKeys: 5, lua: HELD_SCRIPT });
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
      this.keys.conversationBytesHeld(append.projectId),
      append.existing ? '1' : '0',
      append.projectId,
      append.conversationId,
      append.model,
      new Date(append.nowMs).toISOString(),
      append.retentionSeconds,
      bytes,
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
    if (Number(reply[0]) === 0) return null;
    const items = reply.slice(1).map((json) => JSON.parse(String(json)) as MessageRecord);
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
   * turn's read, within the overshoot the bound already allows for exchanges in flight).
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
        this.keys.conversationBytesHeld(projectId),
        defaultMaxBytes,
      ),
    );
    return { bytes: Number(bytes), maxBytes: Number(maxBytes) };
  }

  async setMaxBytes(projectId: string, maxBytes: number | null): Promise<boolean> {
    const done = await guard(this.redis.novaSetConversationBound(this.keys.project(projectId), maxBytes === null ? '' : maxBytes));
    return Number(done) === 1;
  }
}
