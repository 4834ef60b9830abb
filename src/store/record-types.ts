/**
 * Records that model backends create and the gateway keeps per project, so a project
 * can edit only its own: fine-tuning jobs, audio transcriptions, generated assets.
 */
export type RecordKind = 'fine_tuning_job' | 'transcription' | 'asset';

export type Metadata = Record<string, string>;

export interface ManagedRecord {
  id: string;
  kind: RecordKind;
  project_id: string;
  created_at: string;
  updated_at: string;
  /** Kind-specific fields (name, job_status, text, language, asset_kind, tags, …), JSON values. */
  fields: Record<string, unknown>;
  metadata: Metadata;
}

export interface RecordUpdate {
  /** Fields to replace; a field absent here is left as it is. */
  fields?: Record<string, unknown>;
  /** Merged into the metadata: a null value removes the key. */
  metadata?: Record<string, string | null>;
  updatedAt: string;
  maxMetadataKeys: number;
}

export type RecordUpdateResult =
  | { ok: true; record: ManagedRecord; bytesDelta: number }
  | { ok: false; reason: 'not_found' | 'too_many_metadata_keys' };

export interface RecordStore {
  /** Stores a new record (or replaces one with the same id); returns its stored size in bytes. */
  register(record: ManagedRecord): Promise<number>;
  get(projectId: string, kind: RecordKind, id: string): Promise<ManagedRecord | null>;
  /** Applies an update atomically, so concurrent updates of different metadata keys all land. */
  update(projectId: string, kind: RecordKind, id: string, update: RecordUpdate): Promise<RecordUpdateResult>;
}

/**
 * The stored form, shared by both stores so they count storage alike: a hash of fields
 * (`f:` + name → JSON) beside a hash of metadata; size is the bytes of names and values.
 */
export interface EncodedRecord {
  main: Record<string, string>;
  meta: Record<string, string>;
}

export function encodeRecord(record: ManagedRecord): EncodedRecord {
  const main: Record<string, string> = {
    id: record.id,
    kind: record.kind,
    project_id: record.project_id,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
  for (const [name, value] of Object.entries(record.fields)) main[`f:${name}`] = JSON.stringify(value);
  return { main, meta: { ...record.metadata } };
}

export function decodeRecord(main: Record<string, string>, meta: Record<string, string>): ManagedRecord | null {
  if (!main.id) return null;
  const fields: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(main)) {
    if (name.startsWith('f:')) fields[name.slice(2)] = JSON.parse(value);
  }
  return {
    id: main.id,
    kind: main.kind as RecordKind,
    project_id: main.project_id!,
    created_at: main.created_at!,
    updated_at: main.updated_at!,
    fields,
    metadata: { ...meta },
  };
}

export function encodedBytes({ main, meta }: EncodedRecord): number {
  let bytes = 0;
  for (const hash of [main, meta]) {
    for (const [name, value] of Object.entries(hash)) bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
  }
  return bytes;
}
