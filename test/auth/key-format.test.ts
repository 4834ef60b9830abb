import { describe, expect, it } from 'vitest';
import { generateSecret, hashSecret, isWellFormedSecret, redactSecret } from '../../src/auth/key-format.js';
import { SECRET_PREFIX } from '../../src/core/ids.js';

describe('API key secrets', () => {
  it('carry the prefix, at least 190 bits of base62 randomness and a checksum', () => {
    const secret = generateSecret();
    expect(secret.startsWith(SECRET_PREFIX)).toBe(true);
    const body = secret.slice(SECRET_PREFIX.length);
    expect(body).toMatch(/^[0-9A-Za-z]{38}$/);
    // 32 random base62 characters: 32 * log2(62) bits.
    expect(32 * Math.log2(62)).toBeGreaterThanOrEqual(190);
    expect(isWellFormedSecret(secret)).toBe(true);
  });

  it('are distinct across many draws', () => {
    const secrets = new Set(Array.from({ length: 2000 }, generateSecret));
    expect(secrets.size).toBe(2000);
  });

  it('refuses a secret with one character changed (checksum) or the wrong shape', () => {
    const secret = generateSecret();
    const index = SECRET_PREFIX.length + 5;
    const flipped = secret.slice(0, index) + (secret[index] === 'a' ? 'b' : 'a') + secret.slice(index + 1);
    expect(isWellFormedSecret(flipped)).toBe(false);
    expect(isWellFormedSecret(secret.slice(0, -1))).toBe(false);
    expect(isWellFormedSecret(`${secret}x`)).toBe(false);
    expect(isWellFormedSecret(secret.replace(SECRET_PREFIX, 'sk_live_'))).toBe(false);
    expect(isWellFormedSecret('')).toBe(false);
  });

  it('hash deterministically and redact to the last four characters', () => {
    const secret = generateSecret();
    expect(hashSecret(secret)).toBe(hashSecret(secret));
    expect(hashSecret(secret)).not.toContain(secret.slice(SECRET_PREFIX.length, SECRET_PREFIX.length + 8));
    expect(redactSecret(secret)).toBe(`nova_sk_…${secret.slice(-4)}`);
  });
});
