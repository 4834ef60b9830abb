import {
  decodeRecord,
  encodedBytes,
  encodeRecord,
  type ManagedRecord,
  type RecordKind,
  type RecordStore,
  type RecordUpdate,
  type RecordUpdateResult,
} from '../record-types.js';
import type { RedisClient } from './connect.js';
import { execAll, guard } from './guard.js';
import type { KeyNames } from './key-names.js';
import { luaScript } from './lua-script.js';

/** A record's fields and metadata, whole or not at all: update-record.lua. */
const UPDATE_SCRIPT = luaScript(new URL('./update-record.lua', import.meta.url));

type Scripted = RedisClient & {
  novaUpdateRecord(record: string, metadata: string, update: string): Promise<string>;
};

/** update-record.lua's reply. */
type UpdateReply =
  | { error: 'not_found' | 'too_many_metadata_keys' }
  | { bytesDelta: number; record: Record<string, string>; metadata: Record<string, string> };

export class RedisRecordStore implements RecordStore {
  private readonly redis: Scripted;

  constructor(
    redis: RedisClient,
    private readonly keys: KeyNames,
  ) {
    redis.defineCommand('novaUpdateRecord', { numberOfKeys: 2, lua: UPDATE_SCRIPT });
    this.redis = redis as Scripted;
  }

  async register(record: ManagedRecord): Promise<number> {
    const encoded = encodeRecord(record);
    const main = this.keys.record(record.project_id, record.kind, record.id);
    const meta = this.keys.recordMetadata(record.project_id, record.kind, record.id);
    const multi = this.redis.multi().del(main, meta).hset(main, encoded.main);
    if (Object.keys(encoded.meta).length) multi.hset(meta, encoded.meta);
    await execAll(multi);
    return encodedBytes(encoded);
  }

  async get(projectId: string, kind: RecordKind, id: string): Promise<ManagedRecord | null> {
    const [main, meta] = (await execAll(
      this.redis.multi().hgetall(this.keys.record(projectId, kind, id)).hgetall(this.keys.recordMetadata(projectId, kind, id)),
    )) as [Record<string, string>, Record<string, string>];
    return decodeRecord(main, meta);
  }

  async update(projectId: string, kind: RecordKind, id: string, update: RecordUpdate): Promise<RecordUpdateResult> {
    const fields: Record<string, string> = {};
    for (const [name, value] of Object.entries(update.fields ?? {})) fields[name] = JSON.stringify(value);
    const arg = JSON.stringify({ updatedAt: update.updatedAt, maxMetadataKeys: update.maxMetadataKeys, fields, metadata: update.metadata ?? {} });
    const reply = JSON.parse(
      await guard(this.redis.novaUpdateRecord(this.keys.record(projectId, kind, id), this.keys.recordMetadata(projectId, kind, id), arg)),
    ) as UpdateReply;
    if ('error' in reply) return { ok: false, reason: reply.error };
    return { ok: true, record: decodeRecord(reply.record, reply.metadata)!, bytesDelta: reply.bytesDelta };
  }
}
