import { describe, expect, it } from 'vitest';
import { RecentMap } from '../../src/core/recent-map.js';

describe('RecentMap', () => {
  it('keeps exactly the keys set within its last `capacity` sets, with their latest values', () => {
    const capacity = 50;
    const map = new RecentMap<string, number>(capacity);
    // The reference: every set in order; a key is held when its latest set is among the last `capacity`.
    const sets: string[] = [];
    const reference = () => {
      const held = new Map<string, number>();
      const first = Math.max(0, sets.length - capacity);
      sets.forEach((key, step) => {
        if (step >= first) held.set(key, step);
        else held.delete(key);
      });
      for (const [key, step] of held) if (sets.lastIndexOf(key) !== step) held.delete(key);
      return held;
    };
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let step = 0; step < 5_000; step++) {
      // Few distinct keys, so that keys are often set again while still held.
      const key = `k${Math.floor(random() * 120)}`;
      map.set(key, step);
      sets.push(key);
      expect(map.size).toBeLessThanOrEqual(capacity);
      if (step % 97 === 0) {
        const held = reference();
        expect(map.size).toBe(held.size);
        for (let k = 0; k < 120; k++) {
          expect(map.get(`k${k}`)).toBe(held.get(`k${k}`));
          expect(map.has(`k${k}`)).toBe(held.has(`k${k}`));
        }
      }
    }
  });

  it('evicts the oldest key at each set once full', () => {
    const map = new RecentMap<number, number>(3);
    for (let i = 0; i < 10; i++) map.set(i, i);
    expect([7, 8, 9].map((k) => map.get(k))).toEqual([7, 8, 9]);
    expect(map.has(6)).toBe(false);
    expect(map.size).toBe(3);
  });

  it('deletes and clears; a deleted key set again counts from its new set', () => {
    const map = new RecentMap<string, number>(3);
    map.set('a', 1).set('b', 2).set('c', 3);
    expect(map.delete('b')).toBe(true);
    expect(map.delete('b')).toBe(false);
    expect([...map.values()]).toEqual([1, 3]);
    map.set('b', 4); // 'a' was set three sets ago: its slot is reused
    expect(map.has('a')).toBe(false);
    expect([...map.values()]).toEqual([3, 4]);
    map.set('d', 5).set('e', 6); // reusing the old 'b' slot leaves the new 'b' alone; then 'c' goes
    expect(map.get('b')).toBe(4);
    expect(map.has('c')).toBe(false);
    map.clear();
    expect(map.size).toBe(0);
    map.set('x', 1);
    expect([...map.values()]).toEqual([1]);
  });

  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new RecentMap(0)).toThrow(/capacity/);
    expect(() => new RecentMap(1.5)).toThrow(/capacity/);
  });
});
