import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { ADMIN_TOKEN, buildTestApp, createProject, createTestStore, errorOf, STORE_KINDS, type TestApp } from '../support/test-app.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

describe.each(STORE_KINDS)('admin project lifecycle (%s store)', (kind) => {
  let test: TestApp;
  const prefix = `lc${randomBase62(8)}`;
  let redis: Redis | undefined;

  beforeAll(async () => {
    test = await buildTestApp(kind, { store: await createTestStore(kind, { prefix }) });
    if (kind === 'redis') redis = new Redis(inject('redisUrl'));
  });
  afterAll(async () => {
    redis?.disconnect();
    await test.close();
    await test.store.close();
  });

  const get = (url: string) => test.app.inject({ url, headers: admin });

  it('lists projects newest first, a page at a time, and reads one with its key count', async () => {
    const made = [];
    for (const name of ['one', 'two', 'three']) made.push(await createProject(test.app, { name }));
    const first = (await get('/admin/v1/projects?limit=2')).json();
    expect(first.data.map((project: { name: string }) => project.name)).toEqual(['three', 'two']);
    expect(first.has_more).toBe(true);
    const second = (await get(`/admin/v1/projects?limit=2&cursor=${first.next_cursor}`)).json();
    expect(second.data.map((project: { name: string }) => project.name)).toEqual(['one']);
    expect(second).toMatchObject({ has_more: false, next_cursor: null });
    expect(errorOf(await get('/admin/v1/projects?cursor=nonsense'))).toMatchObject({ status: 400, param: 'cursor' });

    const one = made[0]!;
    await test.app.inject({ method: 'POST', url: `/admin/v1/projects/${one.projectId}/api-keys`, headers: admin, payload: { name: 'extra' } });
    expect((await get(`/admin/v1/projects/${one.projectId}`)).json()).toMatchObject({
      id: one.projectId,
      object: 'nova.resource',
      name: 'one',
      rate_limits: { requests_per_minute: 600, burst_limit: 100 },
      key_count: 2,
    });
    expect(errorOf(await get('/admin/v1/projects/proj_unknown0000000000000'))).toMatchObject({ status: 404, param: 'project_id' });
  });

  // Redis only: the index and its backfill are the Redis store's.
  if (kind === 'redis') it('lists projects created before the project index existed (indexed once, on the first listing)', async () => {
    if (!redis) throw new Error('no Redis client');
    const project = await createProject(test.app, { name: 'older' });
    await redis.del(`${prefix}:projects`);
    const ids = (await get('/admin/v1/projects?limit=100')).json().data.map((p: { id: string }) => p.id);
    expect(ids).toContain(project.projectId);
    expect(await redis.zscore(`${prefix}:projects`, project.projectId)).toBe('0');
  });

  it("sets a project's priority on create and PATCH, shows it in every answer, clears it with null; 400 naming a bad one", async () => {
    const patch = (projectId: string, payload: Record<string, unknown>) =>
      test.app.inject({ method: 'PATCH', url: `/admin/v1/projects/${projectId}`, headers: admin, payload });
    const plain = await createProject(test.app, { name: 'plain' });
    expect((await get(`/admin/v1/projects/${plain.projectId}`)).json().priority).toBeNull();
    const created = await test.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: admin, payload: { name: 'urgent', priority: 'high' } });
    expect(created.statusCode, created.body).toBe(200);
    const { id } = created.json();
    expect(created.json().priority).toBe('high');
    expect((await get(`/admin/v1/projects/${id}`)).json().priority).toBe('high');
    const listed = (await get('/admin/v1/projects?limit=100')).json().data.find((p: { id: string }) => p.id === id);
    expect(listed.priority).toBe('high');
    // Stored as the field `priority` of the project's hash, beside the policy the admission reads.
    if (redis) expect(await redis.hget(`${prefix}:{${id}}:project`, 'priority')).toBe('high');
    const lowered = await patch(id, { priority: 'low' });
    expect(lowered.statusCode, lowered.body).toBe(200);
    expect(lowered.json()).toMatchObject({ priority: 'low', rate_limits: created.json().rate_limits });
    // A policy change keeps it; null clears it (normal).
    expect((await patch(id, { requests_per_minute: 77 })).json()).toMatchObject({ priority: 'low', rate_limits: { requests_per_minute: 77 } });
    expect((await patch(id, { priority: null })).json().priority).toBeNull();
    if (redis) expect(await redis.hget(`${prefix}:{${id}}:project`, 'priority')).toBe('');
    for (const priority of ['urgent', 2]) {
      expect(errorOf(await patch(id, { priority }))).toMatchObject({ status: 400, code: 'invalid_parameter', param: 'priority' });
      const refused = await test.app.inject({ method: 'POST', url: '/admin/v1/projects', headers: admin, payload: { name: 'bad', priority } });
      expect(errorOf(refused)).toMatchObject({ status: 400, param: 'priority' });
    }
    expect((await get(`/admin/v1/projects/${id}`)).json().priority).toBeNull();
    const audit = (await get(`/admin/v1/projects/${id}/audit`)).json().data.map((event: { action: string }) => event.action);
    expect(audit).toContain('project.update');
  });

  it('deletes a project: keys stop, stored data goes, the audit trail keeps the deletion', async () => {
    const project = await createProject(test.app, { name: 'doomed' });
    const chat = await test.app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: project.auth,
      payload: { model: 'echo-1', messages: [{ role: 'user', content: 'keep me' }], store: true },
    });
    expect(chat.json().conversation_id).toMatch(/^conv_/);
    await new Promise((resolve) => setTimeout(resolve, 50));

    const deleted = await test.app.inject({ method: 'DELETE', url: `/admin/v1/projects/${project.projectId}`, headers: admin });
    expect(deleted.json()).toMatchObject({ id: project.projectId, deleted: true });
    expect((await test.app.inject({ url: `/v1/conversations/${chat.json().conversation_id}`, headers: project.auth })).statusCode).toBe(401);
    expect((await get(`/admin/v1/projects/${project.projectId}`)).statusCode).toBe(404);
    expect((await get('/admin/v1/projects?limit=100')).json().data.map((p: { id: string }) => p.id)).not.toContain(project.projectId);
    expect((await get(`/admin/v1/projects/${project.projectId}/audit`)).json().data[0]).toMatchObject({ action: 'project.delete' });
    expect(await test.store.conversations.get(project.projectId, chat.json().conversation_id)).toBeNull();
    if (redis) {
      const left = await redis.keys(`${prefix}:{${project.projectId}}:*`);
      expect(left.length).toBeGreaterThan(0);
      expect(left.every((key) => key.endsWith(':audit') || key.includes(':usage:m:') || key.includes(':usage:h:'))).toBe(true);
      expect(left.some((key) => key.includes(':usage:storage'))).toBe(false);
      expect(await redis.pttl(`${prefix}:{${project.projectId}}:audit`)).toBeGreaterThan(0);
    }
  });
});
