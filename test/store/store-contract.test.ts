import { fullPolicy } from '../../src/store/policy.js';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { generateSecret, hashSecret, redactSecret } from '../../src/auth/key-format.js';
import { mintId } from '../../src/core/ids.js';
import type { ApiKeyRecord, AuditEvent, NewKey, ProjectRecord, Store } from '../../src/store/types.js';
import { createQuotaStore, QUOTA_STORE_KINDS } from '../support/quota-stores.js';
import { RedisCluster } from '../support/redis-cluster.js';

const at = (ms: number) => new Date(ms).toISOString();

function newProject(now = Date.now()): ProjectRecord {
  return {
    id: mintId('proj', now),
    name: 'contract',
    environment: 'test',
    created_at: at(now),
    updated_at: at(now),
    rate_limits: fullPolicy({ requests_per_minute: 60, burst_limit: 10 }),
    ceilings: {},
    priority: null,
  };
}

function newKey(projectId: string, now = Date.now(), expiresAt: string | null = null): NewKey & { secret: string } {
  const secret = generateSecret();
  const record: ApiKeyRecord = {
    id: mintId('key', now),
    project_id: projectId,
    name: 'k',
    redacted_value: redactSecret(secret),
    created_at: at(now),
    expires_at: expiresAt,
    last_used_at: null,
    previous_secret_expires_at: null,
    models: null,
    scopes: ['model'],
    metadata: {},
    priority: null,
  };
  return { record, secretHash: hashSecret(secret), secret };
}

function audit(projectId: string, action: AuditEvent['action'], keyId: string | null, reason: string | null = null): AuditEvent {
  return {
    action,
    project_id: projectId,
    key_id: keyId,
    at: at(Date.now()),
    actor: 'admin',
    actor_key_id: null,
    client_address: '127.0.0.1',
    request_id: 'req_test',
    reason,
  };
}

// Every multi-key operation stays in its project's hash slot, so the same suite runs on a Cluster.
describe.each(QUOTA_STORE_KINDS)('store contract (%s)', (kind) => {
  let store: Store;
  let project: ProjectRecord;
  let first: ReturnType<typeof newKey>;
  let cluster: RedisCluster | undefined;

  beforeAll(async () => {
    if (kind === 'cluster') cluster = await RedisCluster.start();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  beforeEach(async () => {
    store = await createQuotaStore(kind, cluster);
    project = newProject();
    first = newKey(project.id);
    await store.projects.create(project, first, [audit(project.id, 'project.create', null)]);
  });
  afterEach(() => store.close());

  it('creates a project with its first key, resolvable by the secret hash', async () => {
    expect(await store.projects.get(project.id)).toEqual(project);
    expect(await store.projects.get('proj_doesnotexist0000')).toBeNull();
    expect(await store.apiKeys.resolve(first.secretHash)).toEqual({
      keyId: first.record.id,
      projectId: project.id,
      expiresAtMs: null,
      validUntilMs: null,
      scopes: ['model'],
      models: null,
      limited: false,
      priority: null,
    });
    expect(await store.apiKeys.resolve(hashSecret(generateSecret()))).toBeNull();
  });

  it('updates key fields in one step; resolve and rotation see them', async () => {
    const patch = {
      scopes: ['keys:read'],
      models: ['m*'],
      metadata: { owner: 'ana' },
      expires_at: new Date(Date.now() + 3_600_000).toISOString(),
      priority: 'low' as const,
    };
    const updated = await store.apiKeys.update(project.id, first.record.id, patch, audit(project.id, 'api_key.update', first.record.id));
    expect(updated?.record).toMatchObject(patch);
    expect(updated?.changedHashes).toEqual([first.secretHash]);
    expect(await store.apiKeys.get(project.id, first.record.id)).toMatchObject(patch);
    expect(await store.apiKeys.resolve(first.secretHash)).toMatchObject({ scopes: ['keys:read'], models: ['m*'], expiresAtMs: Date.parse(patch.expires_at), priority: 'low' });
    const next = newKey(project.id);
    await store.apiKeys.rotate(project.id, first.record.id, { hash: next.secretHash, redactedValue: next.record.redacted_value }, null, audit(project.id, 'api_key.rotate', first.record.id));
    expect(await store.apiKeys.get(project.id, first.record.id)).toMatchObject(patch);
    expect(await store.apiKeys.resolve(next.secretHash)).toMatchObject({ scopes: ['keys:read'], models: ['m*'], priority: 'low' });
    // null clears it: the key follows its project again.
    await store.apiKeys.update(project.id, first.record.id, { priority: null }, audit(project.id, 'api_key.update', first.record.id));
    expect(await store.apiKeys.get(project.id, first.record.id)).toMatchObject({ priority: null });
    expect(await store.apiKeys.resolve(next.secretHash)).toMatchObject({ priority: null });
    expect(await store.apiKeys.update(project.id, 'key_doesnotexist0000000000', { name: 'x' }, audit(project.id, 'api_key.update', null))).toBeNull();
    expect(await store.apiKeys.get(project.id, 'key_doesnotexist0000000000')).toBeNull();
  });

  it("sets and clears a project's priority with its policy, keeping the rest", async () => {
    const set = await store.projects.updatePolicy(project.id, { priority: 'high' }, at(Date.now()), audit(project.id, 'project.update', null));
    expect(set).toMatchObject({ priority: 'high', rate_limits: project.rate_limits });
    expect(await store.projects.get(project.id)).toMatchObject({ priority: 'high' });
    await store.projects.updatePolicy(project.id, { rate_limits: { requests_per_minute: 7 } }, at(Date.now()), audit(project.id, 'project.rate_limits.update', null));
    expect(await store.projects.get(project.id)).toMatchObject({ priority: 'high', rate_limits: { requests_per_minute: 7 } });
    await store.projects.updatePolicy(project.id, { priority: null }, at(Date.now()), audit(project.id, 'project.update', null));
    expect((await store.projects.get(project.id))?.priority).toBeNull();
  });

  it('lists newest first with stable paging while keys are created', async () => {
    const base = Date.now();
    const created: string[] = [first.record.id];
    for (let i = 1; i <= 6; i++) {
      const key = newKey(project.id, base + i * 10);
      await store.apiKeys.create(key, audit(project.id, 'api_key.create', key.record.id));
      created.push(key.record.id);
    }
    const seen: string[] = [];
    let before: string | null = null;
    for (let page = 0; page < 10; page++) {
      const result = await store.apiKeys.list(project.id, 3, before);
      seen.push(...result.data.map((key) => key.id));
      // A key created mid-paging is newer than every cursor: it can only appear on page one.
      const late = newKey(project.id, base + 1000 + page);
      await store.apiKeys.create(late, audit(project.id, 'api_key.create', late.record.id));
      if (!result.hasMore) break;
      before = result.data.at(-1)!.id;
    }
    expect(seen).toEqual([...created].reverse());
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('rotates with a grace period: both secrets resolve, the old one until its deadline', async () => {
    const secret = generateSecret();
    const until = Date.now() + 60_000;
    const rotated = await store.apiKeys.rotate(
      project.id,
      first.record.id,
      { hash: hashSecret(secret), redactedValue: redactSecret(secret) },
      until,
      audit(project.id, 'api_key.rotate', first.record.id, 'scheduled'),
    );
    expect(rotated?.record.id).toBe(first.record.id);
    expect(rotated?.record.redacted_value).toBe(redactSecret(secret));
    expect(rotated?.record.previous_secret_expires_at).toBe(at(until));
    expect(rotated?.changedHashes).toEqual([first.secretHash]);
    expect((await store.apiKeys.resolve(hashSecret(secret)))?.validUntilMs).toBeNull();
    expect((await store.apiKeys.resolve(first.secretHash))?.validUntilMs).toBe(until);
    const events = await store.audit.list(project.id, 10);
    expect(events[0]).toMatchObject({ action: 'api_key.rotate', key_id: first.record.id, reason: 'scheduled' });
  });

  it('rotates without grace: the old secret stops resolving at once; a second rotation drops the older one', async () => {
    const second = generateSecret();
    await store.apiKeys.rotate(project.id, first.record.id, { hash: hashSecret(second), redactedValue: 'x' }, Date.now() + 60_000, audit(project.id, 'api_key.rotate', first.record.id));
    const third = generateSecret();
    const rotated = await store.apiKeys.rotate(project.id, first.record.id, { hash: hashSecret(third), redactedValue: 'y' }, null, audit(project.id, 'api_key.rotate', first.record.id));
    expect(rotated?.changedHashes.sort()).toEqual([hashSecret(second), first.secretHash].sort());
    expect(await store.apiKeys.resolve(first.secretHash)).toBeNull();
    expect(await store.apiKeys.resolve(hashSecret(second))).toBeNull();
    expect(await store.apiKeys.resolve(hashSecret(third))).not.toBeNull();
    expect(await store.apiKeys.rotate(project.id, 'key_missing00000000000', { hash: 'h', redactedValue: 'r' }, null, audit(project.id, 'api_key.rotate', null))).toBeNull();
  });

  it('revokes: no secret of the key resolves and it leaves the list', async () => {
    const second = generateSecret();
    await store.apiKeys.rotate(project.id, first.record.id, { hash: hashSecret(second), redactedValue: 'x' }, Date.now() + 60_000, audit(project.id, 'api_key.rotate', first.record.id));
    const revoked = await store.apiKeys.revoke(project.id, first.record.id, audit(project.id, 'api_key.revoke', first.record.id));
    expect(revoked?.changedHashes.sort()).toEqual([hashSecret(second), first.secretHash].sort());
    expect(await store.apiKeys.resolve(first.secretHash)).toBeNull();
    expect(await store.apiKeys.resolve(hashSecret(second))).toBeNull();
    expect((await store.apiKeys.list(project.id, 10, null)).data).toEqual([]);
    expect(await store.apiKeys.get(project.id, first.record.id)).toBeNull();
    expect(await store.apiKeys.revoke(project.id, first.record.id, audit(project.id, 'api_key.revoke', first.record.id))).toBeNull();
    const actions = (await store.audit.list(project.id, 10)).map((event) => event.action);
    expect(actions).toEqual(['api_key.revoke', 'api_key.rotate', 'project.create']);
  });

  it('keeps keys of other projects apart', async () => {
    const other = newProject();
    const otherKey = newKey(other.id);
    await store.projects.create(other, otherKey, []);
    expect(await store.apiKeys.get(project.id, otherKey.record.id)).toBeNull();
    expect(await store.apiKeys.revoke(project.id, otherKey.record.id, audit(project.id, 'api_key.revoke', null))).toBeNull();
    expect(await store.apiKeys.resolve(otherKey.secretHash)).not.toBeNull();
  });

  it('records last use and the expiry of the key', async () => {
    const expires = Date.now() + 3_600_000;
    const key = newKey(project.id, Date.now(), at(expires));
    await store.apiKeys.create(key, audit(project.id, 'api_key.create', key.record.id));
    expect((await store.apiKeys.resolve(key.secretHash))?.expiresAtMs).toBe(expires);
    const used = at(Date.now());
    await store.apiKeys.touch(project.id, key.record.id, used);
    expect((await store.apiKeys.get(project.id, key.record.id))?.last_used_at).toBe(used);
    // Touching a revoked key must not bring a partial record back.
    await store.apiKeys.revoke(project.id, key.record.id, audit(project.id, 'api_key.revoke', key.record.id));
    await store.apiKeys.touch(project.id, key.record.id, used);
    expect(await store.apiKeys.get(project.id, key.record.id)).toBeNull();
  });

  it('keeps records per project and merges metadata updates atomically', async () => {
    const at = new Date().toISOString();
    const record = { id: 'ftjob-1', kind: 'fine_tuning_job' as const, project_id: project.id, created_at: at, updated_at: at, fields: { name: 'a' }, metadata: { k0: 'v' } };
    expect(await store.records.register(record)).toBeGreaterThan(0);
    expect(await store.records.get('proj_other000000000000', 'fine_tuning_job', 'ftjob-1')).toBeNull();
    const updates = await Promise.all(
      Array.from({ length: 8 }, (_, i) => store.records.update(project.id, 'fine_tuning_job', 'ftjob-1', { metadata: { [`k${i + 1}`]: `v${i + 1}` }, updatedAt: at, maxMetadataKeys: 16 })),
    );
    expect(updates.every((update) => update.ok)).toBe(true);
    expect(Object.keys((await store.records.get(project.id, 'fine_tuning_job', 'ftjob-1'))!.metadata)).toHaveLength(9);
    const refused = await store.records.update(project.id, 'fine_tuning_job', 'ftjob-1', {
      fields: { name: 'b' },
      metadata: Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`extra${i}`, 'v'])),
      updatedAt: at,
      maxMetadataKeys: 16,
    });
    expect(refused).toEqual({ ok: false, reason: 'too_many_metadata_keys' });
    expect((await store.records.get(project.id, 'fine_tuning_job', 'ftjob-1'))!.fields.name).toBe('a');
    const removed = await store.records.update(project.id, 'fine_tuning_job', 'ftjob-1', { fields: { name: 'c' }, metadata: { k0: null }, updatedAt: at, maxMetadataKeys: 16 });
    expect(removed.ok && removed.record.metadata.k0).toBeUndefined();
    expect(removed.ok && removed.bytesDelta).toBeLessThan(0);
    expect(await store.records.update(project.id, 'asset', 'ftjob-1', { metadata: {}, updatedAt: at, maxMetadataKeys: 16 })).toEqual({ ok: false, reason: 'not_found' });
  });

  it('delivers invalidation messages to subscribers', async () => {
    const received: string[][] = [];
    const prefix = `bus${Date.now()}`;
    const listener = kind === 'memory' ? store : await createQuotaStore(kind, cluster, prefix);
    const publisher = kind === 'memory' ? store : await createQuotaStore(kind, cluster, prefix);
    listener.invalidation.subscribe((hashes) => received.push(hashes), () => undefined);
    // The subscription is asynchronous on Redis: publish until the first message lands.
    await expect
      .poll(async () => {
        await publisher.invalidation.publish(['a', 'b']);
        return received.length > 0;
      })
      .toBe(true);
    expect(received[0]).toEqual(['a', 'b']);
    if (listener !== store) await listener.close();
    if (publisher !== store) await publisher.close();
  });
});
