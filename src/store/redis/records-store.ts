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
import { pairsToObject } from './hash-codecs.js';

/**
 * KEYS: record hash, metadata hash. ARGV: updated_at, max metadata keys, field count,
 * then field pairs (name, JSON), then metadata pairs (key, 's'..value | 'd').
 * Checks the key limit before writing anything, so an update lands whole or not at all.
 */
const UPDATE_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
local function size()
  local n = 0
  for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do n = n + #v end
  for _, v in ipairs(redis.call('HGETALL', KEYS[2])) do n = n + #v end
  return n
end
local before = size()
local fields = {'updated_at', ARGV[1]}
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  table.insert(fields, 'f:' .. ARGV[i]); table.insert(fields, ARGV[i + 1]); i = i + 2
end
local count = redis.call('HLEN', KEYS[2])
local sets, dels = {}, {}
while i <= #ARGV do
  local key, value = ARGV[i], ARGV[i + 1]
  local exists = redis.call('HEXISTS', KEYS[2], key) == 1
  if value == 'd' then
    if exists then count = count - 1; table.insert(dels, key) end
  else
    if not exists then count = count + 1 end
    table.insert(sets, key); table.insert(sets, string.sub(value, 2))
  end
  i = i + 2
end
if count > tonumber(ARGV[2]) then return {-2} end
redis.call('HSET', KEYS[1], unpack(fields))
if #sets > 0 then redis.call('HSET', KEYS[2], unpack(sets)) end
if #dels > 0 then redis.call('HDEL', KEYS[2], unpack(dels)) end
return {size() - before, redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
`;

type Scripted = RedisClient & {
  novaUpdateRecord(...args: (string | number)[]): Promise<[number, string[]?, string[]?]>;
};

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
    const fieldArgs = Object.entries(update.fields ?? {}).flatMap(([name, value]) => [name, JSON.stringify(value)]);
    const metadataArgs = Object.entries(update.metadata ?? {}).flatMap(([key, value]) => [key, value === null ? 'd' : `s${value}`]);
    const [delta, main, meta] = await guard(
      this.redis.novaUpdateRecord(
        this.keys.record(projectId, kind, id),
        this.keys.recordMetadata(projectId, kind, id),
        update.updatedAt,
        update.maxMetadataKeys,
        fieldArgs.length / 2,
        ...fieldArgs,
        ...metadataArgs,
      ),
    );
    if (delta === -1 && !main) return { ok: false, reason: 'not_found' };
    if (delta === -2 && !main) return { ok: false, reason: 'too_many_metadata_keys' };
    return { ok: true, record: decodeRecord(pairsToObject(main!), pairsToObject(meta!))!, bytesDelta: delta };
  }
}
