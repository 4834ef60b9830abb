import { describe, expect, it } from 'vitest';
import { KeyCache } from '../../src/auth/key-cache.js';
import { withAccess, type AuthenticatedKey } from '../../src/auth/key-access.js';

const principal = (keyId: string): AuthenticatedKey => withAccess({ keyId, projectId: 'proj_x', expiresAtMs: null, validUntilMs: null, priority: null });

describe('KeyCache', () => {
  it('serves entries until their TTL passes (injected clock)', () => {
    let now = 1_000;
    const cache = new KeyCache(500, 10, () => now);
    cache.set('h1', principal('key_1'));
    now += 499;
    expect(cache.get('h1')?.keyId).toBe('key_1');
    now += 1;
    expect(cache.get('h1')).toBeUndefined();
  });

  it('drops invalidated entries at once and everything on clear', () => {
    const cache = new KeyCache(60_000);
    cache.set('h1', principal('key_1'));
    cache.set('h2', principal('key_2'));
    cache.delete(['h1']);
    expect(cache.get('h1')).toBeUndefined();
    expect(cache.get('h2')?.keyId).toBe('key_2');
    cache.clear();
    expect(cache.size).toBe(0);
  });

  it('evicts the oldest entry beyond its size bound', () => {
    const cache = new KeyCache(60_000, 2);
    cache.set('h1', principal('key_1'));
    cache.set('h2', principal('key_2'));
    cache.set('h3', principal('key_3'));
    expect(cache.get('h1')).toBeUndefined();
    expect(cache.size).toBe(2);
  });

  it('caches nothing with a TTL of 0', () => {
    const cache = new KeyCache(0);
    cache.set('h1', principal('key_1'));
    expect(cache.get('h1')).toBeUndefined();
  });
});

describe('KeyCache stale-if-error', () => {
  it('keeps an expired entry for the store-outage path, not for normal lookups', () => {
    let now = 0;
    const cache = new KeyCache(1000, 10, () => now, 60_000);
    cache.set('h1', principal('key_1'));
    now = 5000;
    expect(cache.get('h1')).toBeUndefined();
    expect(cache.getStale('h1')?.keyId).toBe('key_1');
    now = 60_000;
    expect(cache.getStale('h1')).toBeUndefined();
  });

  it('marks every entry stale after a lost subscription until it is stored again', () => {
    const cache = new KeyCache(60_000);
    cache.set('h1', principal('key_1'));
    cache.markAllStale();
    expect(cache.get('h1')).toBeUndefined();
    expect(cache.getStale('h1')?.keyId).toBe('key_1');
    cache.set('h1', principal('key_1'));
    expect(cache.get('h1')?.keyId).toBe('key_1');
  });

  it('forgets an invalidated entry on both paths', () => {
    const cache = new KeyCache(60_000);
    cache.set('h1', principal('key_1'));
    cache.delete(['h1']);
    expect(cache.getStale('h1')).toBeUndefined();
  });
});
