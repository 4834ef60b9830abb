import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { responseHistoryTokens } from '../../src/model-call/response-history.js';
import { decodeOwner, encodeOwner } from '../../src/store/response-types.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import { buildTestApp, createProject, createTestStore, STORE_KINDS, type TestApp, type TestProject } from '../support/test-app.js';

/** Issue 29 item 1: a request continuing a previous response is charged the history the upstream reads again. */
describe('response history tokens', () => {
  it('keeps owner records written before the tokens readable, and model ids with colons whole', () => {
    expect(decodeOwner('0:llama3:8b')).toEqual({ targetIndex: 0, model: 'llama3:8b' });
    expect(decodeOwner(encodeOwner({ targetIndex: 2, model: 'org/model:v1', historyTokens: 1234 }))).toEqual({ targetIndex: 2, model: 'org/model:v1', historyTokens: 1234 });
  });

  describe.each(STORE_KINDS)('owner store (%s)', (kind) => {
    it('adds the tokens to a live owner record, keeping its expiry, and never brings back one that is gone', async () => {
      const store = await createTestStore(kind);
      try {
        const owner = { model: 'm', targetIndex: 1 };
        await store.responses.claim('proj_a', 'resp_1', owner, 60_000);
        await store.responses.recordHistory('proj_a', 'resp_1', { ...owner, historyTokens: 42 });
        expect(await store.responses.get('proj_a', 'resp_1')).toEqual({ ...owner, historyTokens: 42 });
        await store.responses.release('proj_a', 'resp_1');
        await store.responses.recordHistory('proj_a', 'resp_1', { ...owner, historyTokens: 43 });
        expect(await store.responses.get('proj_a', 'resp_1')).toBeNull();
        await store.responses.claim('proj_a', 'resp_2', owner, 100);
        await store.responses.recordHistory('proj_a', 'resp_2', { ...owner, historyTokens: 44 });
        await expect.poll(() => store.responses.get('proj_a', 'resp_2')).toBeNull();
      } finally {
        await store.close();
      }
    });
  });

  describe('through the Responses route (redis)', () => {
    let upstream: LoopbackUpstream;
    let t: TestApp;
    let project: TestProject;

    beforeAll(async () => {
      // The backend reports 40 input tokens and one output token per piece: 45 in all.
      upstream = await LoopbackUpstream.start({ default: { promptTokens: 40, chunks: ['a ', 'b ', 'c ', 'd ', 'e'] } });
      t = await buildTestApp('redis', {
        config: defaultConfig({ models: [{ id: 'resp-1', upstream: upstream.baseUrl(), endpoints: ['responses'] }] }),
      });
      project = await createProject(t.app, { name: 'history' });
    });
    afterAll(async () => {
      await t?.close();
      await upstream?.close();
    });

    const create = async (payload: Record<string, unknown>) => {
      const response = await t.app.inject({ method: 'POST', url: '/v1/responses', headers: project.auth, payload: { model: 'resp-1', input: 'Hi', ...payload } });
      expect(response.statusCode, response.body).toBe(200);
      return response;
    };
    const history = (previous: unknown, projectId = project.projectId) => responseHistoryTokens(t.ctx, projectId, { model: 'resp-1', previous_response_id: previous });

    it("is a JSON response's input + output tokens", async () => {
      const id = (await create({})).json().id as string;
      expect(await history(id)).toBe(45);
      // A continuation's own total is the next one's history.
      const next = (await create({ previous_response_id: id })).json().id as string;
      expect(await history(next)).toBe(40 + 3);
    });

    it("is a stream's tokens, from its response.completed event", async () => {
      const streamed = await create({ stream: true });
      const id = /"id":"(resp_[^"]+)"/.exec(streamed.body)![1]!;
      await expect.poll(() => history(id)).toBe(45);
    });

    it('is 0 without a previous response, for one not stored, another project\'s or an unknown one', async () => {
      const id = (await create({})).json().id as string;
      const unstored = (await create({ store: false })).json().id as string;
      const other = await createProject(t.app, { name: 'other' });
      expect(await responseHistoryTokens(t.ctx, project.projectId, { model: 'resp-1' })).toBe(0);
      expect(await responseHistoryTokens(t.ctx, project.projectId, null)).toBe(0);
      expect(await history(unstored)).toBe(0);
      expect(await history(id, other.projectId)).toBe(0);
      expect(await history('resp_unknown')).toBe(0);
      expect(await history('not an id')).toBe(0);
      expect(await history(17)).toBe(0);
    });
  });
});
