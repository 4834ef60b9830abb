import { hash, timingSafeEqual } from 'node:crypto';
import { bearerToken } from './authenticator.js';

const digest = (value: string) => hash('sha256', value, 'buffer');

/** Constant-time: both sides are hashed to equal length before comparing. */
export function isAdminToken(authorization: string | undefined, adminToken: string): boolean {
  const presented = bearerToken(authorization);
  return presented !== undefined && timingSafeEqual(digest(presented), digest(adminToken));
}
