/**
 * A Map that keeps the keys set within its last `capacity` sets (so at most `capacity` keys),
 * evicting the oldest in O(1).
 *
 * Not `map.delete(map.keys().next().value)`: V8 leaves a deleted entry in place until the table is
 * rebuilt, and an iterator steps over each one, so on a full Map that evicts at every insert the
 * oldest key costs a scan of up to `capacity` holes (7 µs at 10,000 entries, once per request).
 */
export class RecentMap<K, V> {
  private readonly entries = new Map<K, { value: V; stamp: number }>();
  /** Keys in insertion order, ring-wise; a slot's key is evicted when the slot is reused. */
  private readonly ring: Array<K | undefined>;
  private stamp = 0;

  constructor(private readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacity must be a positive integer');
    this.ring = new Array<K | undefined>(capacity);
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    return this.entries.get(key)?.value;
  }

  has(key: K): boolean {
    return this.entries.has(key);
  }

  delete(key: K): boolean {
    // The key's ring slot stays; its stamp no longer matches, so reusing the slot leaves the map alone.
    return this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
    this.ring.fill(undefined);
  }

  *values(): IterableIterator<V> {
    for (const entry of this.entries.values()) yield entry.value;
  }

  /** Sets the key as the newest; a key set again counts from then. */
  set(key: K, value: V): this {
    const slot = this.stamp % this.capacity;
    const oldest = this.ring[slot];
    // The slot's key was set `capacity` sets ago, unless it was set again since (a newer stamp).
    if (oldest !== undefined && this.entries.get(oldest)?.stamp === this.stamp - this.capacity) this.entries.delete(oldest);
    this.ring[slot] = key;
    this.entries.set(key, { value, stamp: this.stamp });
    this.stamp++;
    return this;
  }
}
