import {
  decodeRecord,
  encodedBytes,
  encodeRecord,
  type EncodedRecord,
  type RecordKind,
  type RecordStore,
  type RecordUpdate,
  type RecordUpdateResult,
} from '../record-types.js';

export class MemoryRecordStore implements RecordStore {
  private readonly records = new Map<string, EncodedRecord>();

  private static key = (projectId: string, kind: RecordKind, id: string) => `${projectId}\u0000${kind}\u0000${id}`;

  async register(record: Parameters<RecordStore['register']>[0]): Promise<number> {
    const encoded = encodeRecord(record);
    this.records.set(MemoryRecordStore.key(record.project_id, record.kind, record.id), encoded);
    return encodedBytes(encoded);
  }

  async get(projectId: string, kind: RecordKind, id: string) {
    const encoded = this.records.get(MemoryRecordStore.key(projectId, kind, id));
    return encoded ? decodeRecord(encoded.main, encoded.meta) : null;
  }

  async update(projectId: string, kind: RecordKind, id: string, update: RecordUpdate): Promise<RecordUpdateResult> {
    const encoded = this.records.get(MemoryRecordStore.key(projectId, kind, id));
    if (!encoded) return { ok: false, reason: 'not_found' };
    const meta = { ...encoded.meta };
    for (const [key, value] of Object.entries(update.metadata ?? {})) {
      if (value === null) delete meta[key];
      else meta[key] = value;
    }
    if (Object.keys(meta).length > update.maxMetadataKeys) return { ok: false, reason: 'too_many_metadata_keys' };
    const before = encodedBytes(encoded);
    encoded.meta = meta;
    encoded.main.updated_at = update.updatedAt;
    for (const [name, value] of Object.entries(update.fields ?? {})) encoded.main[`f:${name}`] = JSON.stringify(value);
    return { ok: true, record: decodeRecord(encoded.main, encoded.meta)!, bytesDelta: encodedBytes(encoded) - before };
  }

  forgetProject(projectId: string): void {
    for (const key of this.records.keys()) if (key.startsWith(`${projectId}\u0000`)) this.records.delete(key);
  }
}
