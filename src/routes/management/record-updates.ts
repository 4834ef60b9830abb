import type { FastifyRequest } from 'fastify';
import type { AppContext } from '../app-context.js';
import { envelope } from '../../http/envelope.js';
import { invalidParameter, resourceNotFound } from '../../http/errors.js';
import type { UsageRecord } from '../../quota/usage-meter.js';
import type { ManagedRecord, RecordKind } from '../../store/record-types.js';
import { METADATA_MAX_KEYS } from './record-schemas.js';
import { principalOf } from '../principal-of-request.js';

const NOUNS: Record<RecordKind, { what: string; param: string }> = {
  fine_tuning_job: { what: 'fine-tuning job', param: 'job_id' },
  transcription: { what: 'transcription', param: 'transcription_id' },
  asset: { what: 'asset', param: 'asset_id' },
};

/** A record as clients see it: its own fields, metadata when the kind has it, and times. */
export function recordView(record: ManagedRecord) {
  const view: Record<string, unknown> = { ...record.fields, project_id: record.project_id };
  if (record.kind !== 'transcription') view.metadata = record.metadata;
  view.created_at = record.created_at;
  view.updated_at = record.updated_at;
  return envelope(record.id, view);
}

/** Applies a metadata-endpoint update for the calling project and counts the storage it changes. */
export async function updateOwnRecord<View>(
  ctx: AppContext,
  request: FastifyRequest,
  kind: RecordKind,
  id: string,
  update: { fields?: Record<string, unknown>; metadata?: Record<string, string | null> },
): Promise<View> {
  const { projectId } = principalOf(request);
  const result = await ctx.store.records.update(projectId, kind, id, {
    ...update,
    updatedAt: new Date(ctx.now()).toISOString(),
    maxMetadataKeys: METADATA_MAX_KEYS,
  });
  if (!result.ok && result.reason === 'not_found') throw resourceNotFound(NOUNS[kind].what, NOUNS[kind].param);
  if (!result.ok) throw invalidParameter(`metadata may hold at most ${METADATA_MAX_KEYS} keys after the update.`, 'metadata');
  if (result.bytesDelta !== 0) ctx.usage.record({ projectId, requestId: request.id, storageBytesDelta: result.bytesDelta });
  // The route's response schema states the view's shape for this kind.
  return recordView(result.record) as View;
}

export function newRecord(
  kind: RecordKind,
  projectId: string,
  id: string,
  fields: Record<string, unknown>,
  metadata: Record<string, string>,
  nowMs: number,
): ManagedRecord {
  const at = new Date(nowMs).toISOString();
  return { id, kind, project_id: projectId, created_at: at, updated_at: at, fields, metadata };
}

/**
 * Registers records created through the gateway or by the admin API, and reports the
 * request's usage once: the records' storage plus what the caller adds (images, audio).
 */
export async function registerRecord(
  ctx: AppContext,
  requestId: string,
  records: ManagedRecord | ManagedRecord[],
  usage: Omit<UsageRecord, 'projectId' | 'requestId' | 'storageBytesDelta'> = {},
): Promise<void> {
  const list = Array.isArray(records) ? records : [records];
  let bytes = 0;
  for (const record of list) bytes += await ctx.store.records.register(record);
  ctx.usage.record({ projectId: list[0]!.project_id, requestId, storageBytesDelta: bytes, ...usage });
}
