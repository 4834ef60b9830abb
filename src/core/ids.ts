import { randomBytes } from 'node:crypto';

// ASCII order, so fixed-width base62 strings sort like the numbers they encode.
export const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// CSPRNG bytes fetched 4 KiB at a time: one randomBytes call per id cost ~7% of the CPU of a
// proxied chat completion (several ids each) in the benchmark.
const POOL_SIZE = 4096;
let pool = randomBytes(POOL_SIZE);
let poolOffset = 0;

function nextRandomByte(): number {
  if (poolOffset === POOL_SIZE) {
    pool = randomBytes(POOL_SIZE);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

/** Uniform base62 characters from the CSPRNG (rejection sampling keeps them unbiased). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = nextRandomByte();
    if (byte < 248) out += BASE62[byte % 62];
  }
  return out;
}

export function encodeBase62(value: number, width: number): string {
  let out = '';
  let rest = Math.floor(value);
  while (rest > 0) {
    out = BASE62[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out.padStart(width, '0');
}

/** The prefix of every API key secret. */
export const SECRET_PREFIX = 'nova_sk_';

/**
 * Whether text may carry an API key: anything holding the key prefix, in any case, whether
 * or not the rest is well formed (a key with a typo is still a secret).
 */
export function mayHoldSecret(text: string): boolean {
  return text.toLowerCase().includes(SECRET_PREFIX);
}

export type IdPrefix = 'proj' | 'key' | 'conv' | 'msg' | 'trans' | 'asset' | 'req';

/**
 * `<prefix>_` + 8 base62 chars of milliseconds + 14 random: ids sort by creation time,
 * which gives stable newest-first paging without a separate index.
 */
export function mintId(prefix: IdPrefix, now = Date.now()): string {
  return `${prefix}_${encodeBase62(now, 8)}${randomBase62(14)}`;
}

export const GATEWAY_ID_PATTERN = '^[a-z]+_[0-9A-Za-z]{16,64}$';
export const UPSTREAM_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$';

export function isGatewayId(prefix: IdPrefix, value: string): boolean {
  return value.startsWith(`${prefix}_`) && /^[0-9A-Za-z]{16,64}$/.test(value.slice(prefix.length + 1));
}
