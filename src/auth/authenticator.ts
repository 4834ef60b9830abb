import { expiredApiKey, invalidApiKey, missingApiKey } from '../http/errors.js';
import { StoreUnavailableError, type Store } from '../store/types.js';
import { hashSecret, isWellFormedSecret } from './key-format.js';
import type { FailedAttempts } from './failed-attempts.js';
import type { KeyCache } from './key-cache.js';
import { withAccess, type AuthenticatedKey } from './key-access.js';

const TOUCH_INTERVAL_MS = 60_000;

export interface AuthEvents {
  cacheHit(): void;
  cacheMiss(): void;
  failure(reason: 'missing' | 'malformed' | 'unknown' | 'expired' | 'throttled'): void;
  /** A key served from an expired cache entry because the store was unreachable. */
  staleServed?(): void;
}

const noEvents: AuthEvents = { cacheHit() {}, cacheMiss() {}, failure() {} };

export interface AuthenticatorOptions {
  store: Store;
  cache: KeyCache;
  failedAttempts: FailedAttempts;
  events?: AuthEvents;
  now?: () => number;
  onBackgroundError?: (error: unknown) => void;
}

export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** Resolves a presented key (src/auth/presented-key.ts) to its principal, from the cache when it can. */
export class Authenticator {
  private readonly lastTouched = new Map<string, number>();
  private readonly events: AuthEvents;
  private readonly now: () => number;

  constructor(private readonly options: AuthenticatorOptions) {
    this.events = options.events ?? noEvents;
    this.now = options.now ?? Date.now;
    options.store.invalidation.subscribe(
      (hashes) => options.cache.delete(hashes),
      () => options.cache.markAllStale(),
    );
  }

  async authenticate(secret: string | undefined, clientAddress: string): Promise<AuthenticatedKey> {
    if (secret === undefined) {
      this.events.failure('missing');
      throw missingApiKey();
    }
    if (!isWellFormedSecret(secret)) return this.fail('malformed', clientAddress);
    return this.principalOf(hashSecret(secret), clientAddress);
  }

  /**
   * The key of a console session (src/auth/console-session.ts), by its secret's hash, from the same
   * cache: a revoked key ends its sessions as fast as its API calls. Not a guess, so not counted
   * against the address.
   */
  async authenticateHash(hash: string): Promise<AuthenticatedKey> {
    return this.principalOf(hash, null);
  }

  /** `clientAddress` null: a session's key, whose failure is not counted against the address. */
  private async principalOf(hash: string, clientAddress: string | null): Promise<AuthenticatedKey> {
    let principal = this.options.cache.get(hash);
    if (principal) {
      this.events.cacheHit();
    } else {
      this.events.cacheMiss();
      principal = await this.resolve(hash);
    }
    const now = this.now();
    if (!principal) return this.fail('unknown', clientAddress);
    if (principal.validUntilMs !== null && principal.validUntilMs <= now) {
      this.options.cache.delete([hash]);
      return this.fail('unknown', clientAddress);
    }
    if (principal.expiresAtMs !== null && principal.expiresAtMs <= now) {
      this.events.failure('expired');
      throw expiredApiKey();
    }
    this.touch(principal, now);
    return principal;
  }

  /**
   * Asks the store; when it cannot answer, a key this replica has seen recently keeps
   * working (stale-if-error), so an outage does not lock out known clients.
   */
  private async resolve(hash: string): Promise<AuthenticatedKey | undefined> {
    try {
      const resolved = await this.options.store.apiKeys.resolve(hash);
      const principal = resolved ? withAccess(resolved) : undefined;
      if (principal) this.options.cache.set(hash, principal);
      else this.options.cache.delete([hash]);
      return principal;
    } catch (error) {
      const stale = error instanceof StoreUnavailableError ? this.options.cache.getStale(hash) : undefined;
      if (!stale) throw error;
      this.events.staleServed?.();
      return stale;
    }
  }

  /** Drops cached entries now and tells the other replicas to. */
  async invalidate(secretHashes: string[]): Promise<void> {
    this.options.cache.delete(secretHashes);
    await this.options.store.invalidation.publish(secretHashes);
  }

  private async fail(reason: 'malformed' | 'unknown', clientAddress: string | null): Promise<never> {
    try {
      if (clientAddress !== null) await this.options.failedAttempts.count(clientAddress);
    } catch (throttled) {
      this.events.failure('throttled');
      throw throttled;
    }
    this.events.failure(reason);
    throw invalidApiKey();
  }

  /** last_used_at is written at most once a minute per key and replica, off the request path. */
  private touch(principal: AuthenticatedKey, now: number): void {
    const last = this.lastTouched.get(principal.keyId) ?? 0;
    if (now - last < TOUCH_INTERVAL_MS) return;
    this.lastTouched.set(principal.keyId, now);
    if (this.lastTouched.size > 100_000) this.lastTouched.clear();
    this.options.store.apiKeys
      .touch(principal.projectId, principal.keyId, new Date(now).toISOString())
      .catch((error: unknown) => this.options.onBackgroundError?.(error));
  }
}
