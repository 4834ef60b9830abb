import { invalidParameter } from './errors.js';

/**
 * Node keeps the first of several Authorization headers and drops the rest silently, so a
 * proxy in front that reads the last one would judge a different credential than the
 * gateway. A request carrying more than one is refused.
 */
export function refuseRepeatedAuthorization(rawHeaders: string[]): void {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.length === 13 && rawHeaders[i]!.toLowerCase() === 'authorization' && ++seen > 1) {
      throw invalidParameter('Send exactly one Authorization header.', 'authorization');
    }
  }
}
