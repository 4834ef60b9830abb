import { Counter, type Registry } from 'prom-client';
import type { AuthEvents } from '../auth/authenticator.js';

/** The key cache and authentication failures (never a key or a hash as a label). */
export class AuthMetrics {
  readonly cacheHits: Counter;
  readonly cacheMisses: Counter;
  readonly failures: Counter<'reason'>;
  readonly staleServed: Counter;
  readonly events: AuthEvents;

  constructor(registry: Registry) {
    this.cacheHits = new Counter({
      name: 'nova_auth_key_cache_hits_total',
      help: 'API key lookups answered from the in-process cache.',
      registers: [registry],
    });
    this.cacheMisses = new Counter({
      name: 'nova_auth_key_cache_misses_total',
      help: 'API key lookups that went to the store.',
      registers: [registry],
    });
    this.failures = new Counter({
      name: 'nova_auth_failures_total',
      help: 'Refused authentications by reason (missing, malformed, unknown, expired, throttled).',
      labelNames: ['reason'],
      registers: [registry],
    });
    this.staleServed = new Counter({
      name: 'nova_auth_stale_served_total',
      help: 'Keys authenticated from an expired cache entry because the store was unreachable.',
      registers: [registry],
    });
    this.events = {
      cacheHit: () => this.cacheHits.inc(),
      cacheMiss: () => this.cacheMisses.inc(),
      failure: (reason) => this.failures.inc({ reason }),
      staleServed: () => this.staleServed.inc(),
    };
  }
}
