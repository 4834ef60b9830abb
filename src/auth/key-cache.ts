import type { KeyPrincipal } from '../store/types.js';

interface Entry {
  principal: KeyPrincipal;
  storedAt: number;
}

/**
 * Serves authentication from process memory. Invalidation messages delete entries at
 * once; the TTL bounds staleness when a message is lost. Map order gives cheap
 * oldest-first eviction.
 */
export class KeyCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 100_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(secretHash: string): KeyPrincipal | undefined {
    const entry = this.entries.get(secretHash);
    if (!entry) return undefined;
    if (this.now() - entry.storedAt >= this.ttlMs) {
      this.entries.delete(secretHash);
      return undefined;
    }
    return entry.principal;
  }

  set(secretHash: string, principal: KeyPrincipal): void {
    if (this.ttlMs <= 0) return;
    this.entries.delete(secretHash);
    this.entries.set(secretHash, { principal, storedAt: this.now() });
    if (this.entries.size > this.maxEntries) {
      this.entries.delete(this.entries.keys().next().value!);
    }
  }

  delete(secretHashes: string[]): void {
    secretHashes.forEach((hash) => this.entries.delete(hash));
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
