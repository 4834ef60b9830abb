import type { Store } from '../store/types.js';
import type { AlertEvents } from './alert-events.js';

const DAY_MS = 86_400_000;
/** Notices before `expires_at`, the nearest last: a key found inside both windows gets only the nearer one. */
const MARKS = [1, 7] as const;

/**
 * Finds keys expiring within 7 days (then within 1 day) and emits `api_key.expiring` for each
 * mark once: every replica scans, and the marker set with the event (AlertStore.appendOnce)
 * lets only the first one through. The marker names the expiry, so a key given a new
 * `expires_at` is told again.
 */
export async function scanExpiringKeys(store: Store, events: AlertEvents, nowMs: number): Promise<number> {
  let emitted = 0;
  let after: string | null = null;
  for (;;) {
    const page = await store.projects.list(100, after);
    for (const project of page.data) emitted += await scanProject(store, events, project.id, nowMs);
    if (!page.hasMore || page.data.length === 0) return emitted;
    after = page.data.at(-1)!.id;
  }
}

async function scanProject(store: Store, events: AlertEvents, projectId: string, nowMs: number): Promise<number> {
  let emitted = 0;
  let before: string | null = null;
  for (;;) {
    const page = await store.apiKeys.list(projectId, 100, before);
    for (const key of page.data) {
      if (key.expires_at === null) continue;
      const expiresAt = Date.parse(key.expires_at);
      const left = expiresAt - nowMs;
      if (left <= 0) continue;
      const mark = MARKS.find((days) => left <= days * DAY_MS);
      if (mark === undefined) continue;
      const marker = `expiring:${key.id}:${mark}:${expiresAt}`;
      const data = { project_id: projectId, api_key_id: key.id, name: key.name, expires_at: key.expires_at, days_left: mark };
      // The marker outlives the key's expiry by a day: no repeat while the mark could still match.
      if (await events.emitOnce(marker, left + DAY_MS, { type: 'api_key.expiring', data })) emitted++;
    }
    if (!page.hasMore || page.data.length === 0) return emitted;
    before = page.data.at(-1)!.id;
  }
}
