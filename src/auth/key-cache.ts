import { RecentMap } from '../core/recent-map.js';
import type { AuthenticatedKey } from './key-access.js';

interface Entry {
  principal: AuthenticatedKey;
  storedAt: number;
  /** Set when invalidation messages may have been missed: revalidate before trusting it. */
  stale: boolean;
}

/**
 * Serves authentication from process memory. Invalidation messages delete entries at
 * once; the TTL bounds staleness when a message is lost. An entry past its TTL (or marked
 * stale after a lost subscription) is not trusted while the store answers, but it is kept
 * for `staleIfErrorMs`, so known keys keep working while the store is unreachable.
 * It holds the keys of its last `maxEntries` sets, evicting the one set longest ago in O(1).
 */
export class KeyCache {
  private readonly entries: RecentMap<string, Entry>;

  constructor(
    private readonly ttlMs: number,
    maxEntries = 100_000,
    private readonly now: () => number = Date.now,
    private readonly staleIfErrorMs = 15 * 60_000,
  ) {
    this.entries = new RecentMap(maxEntries);
  }

  /** A fresh entry: within its TTL and not marked stale. */
  get(secretHash: string): AuthenticatedKey | undefined {
    const entry = this.entries.get(secretHash);
    if (!entry || entry.stale || this.now() - entry.storedAt >= this.ttlMs) return undefined;
    return entry.principal;
  }

  /** Any entry not older than staleIfErrorMs: for when the store cannot be asked. */
  getStale(secretHash: string): AuthenticatedKey | undefined {
    const entry = this.entries.get(secretHash);
    if (!entry) return undefined;
    if (this.now() - entry.storedAt >= Math.max(this.ttlMs, this.staleIfErrorMs)) {
      this.entries.delete(secretHash);
      return undefined;
    }
    return entry.principal;
  }

  set(secretHash: string, principal: AuthenticatedKey): void {
    if (this.ttlMs <= 0) return;
    this.entries.set(secretHash, { principal, storedAt: this.now(), stale: false });
  }

  delete(secretHashes: string[]): void {
    secretHashes.forEach((hash) => this.entries.delete(hash));
  }

  /** After a lost subscription: every entry must be revalidated before it is trusted again. */
  markAllStale(): void {
    for (const entry of this.entries.values()) entry.stale = true;
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
