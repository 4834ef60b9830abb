import { invalidParameter } from './errors.js';

/** The headers that carry a credential (`x-api-key` is what Anthropic's SDKs send). */
const CREDENTIAL_HEADERS = ['authorization', 'x-api-key'];

/**
 * Node keeps the first of several Authorization headers and drops the rest silently (and joins
 * repeated x-api-key values), so a proxy in front that reads the last one would judge a different
 * credential than the gateway. A request carrying either more than once is refused.
 */
export function refuseRepeatedAuthorization(rawHeaders: string[]): void {
  let authorization = 0;
  let apiKey = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length !== 13 && name.length !== 9) continue;
    const lower = name.toLowerCase();
    if ((lower === CREDENTIAL_HEADERS[0] && ++authorization > 1) || (lower === CREDENTIAL_HEADERS[1] && ++apiKey > 1)) {
      throw invalidParameter(`Send exactly one ${lower === 'x-api-key' ? 'x-api-key' : 'Authorization'} header.`, lower);
    }
  }
}
