import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { rateLimitExceeded } from '../http/errors.js';

/**
 * Failed authentication attempts (API keys and the admin token alike) per client address.
 * Only failures are counted, after a credential was found invalid, so a valid one is never
 * refused because of them.
 */
export class FailedAttempts {
  constructor(
    private readonly limiter: RateLimiterAbstract,
    private readonly onStoreError: (error: unknown) => void = () => {},
  ) {}

  /** Counts one failure; throws a 429 once the address has used up its allowance. */
  async count(clientAddress: string): Promise<void> {
    try {
      await this.limiter.consume(clientAddress);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) {
        throw rateLimitExceeded(rejection.msBeforeNext / 1000, 'Too many failed authentication attempts from this address.');
      }
      this.onStoreError(rejection);
    }
  }
}
