import { hash } from 'node:crypto';
import { encodeBase62, randomBase62, SECRET_PREFIX } from '../core/ids.js';

// 32 base62 chars carry 32 * log2(62) = 190.5 bits of randomness.
const RANDOM_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
const SECRET_PATTERN = new RegExp(`^${SECRET_PREFIX}[0-9A-Za-z]{${RANDOM_LENGTH + CHECKSUM_LENGTH}}$`);

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(text: string): number {
  let crc = 0xffffffff;
  for (let i = 0; i < text.length; i++) crc = CRC_TABLE[(crc ^ text.charCodeAt(i)) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

const checksum = (random: string) => encodeBase62(crc32(random), CHECKSUM_LENGTH);

export function generateSecret(): string {
  const random = randomBase62(RANDOM_LENGTH);
  return `${SECRET_PREFIX}${random}${checksum(random)}`;
}

/** Shape and checksum only: a typo or a guessed string is refused without touching the store. */
export function isWellFormedSecret(secret: string): boolean {
  if (!SECRET_PATTERN.test(secret)) return false;
  const random = secret.slice(SECRET_PREFIX.length, SECRET_PREFIX.length + RANDOM_LENGTH);
  return secret.endsWith(checksum(random));
}

/**
 * The secrets are 190-bit random strings, so a fast hash is as strong as a slow one
 * here, and it keeps a cache miss cheap. Every request hashes its key (the cache is keyed by
 * the hash, so no secret is held): the one-shot `hash` costs a third of a Hash object.
 */
export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'base64url');
}

export function redactSecret(secret: string): string {
  return `${SECRET_PREFIX}…${secret.slice(-4)}`;
}

