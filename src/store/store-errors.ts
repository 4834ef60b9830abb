import type { SettleFence } from './quota-types.js';
import { StoreUnavailableError } from './types.js';

const BY_CODE: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed',
  EPIPE: 'connection closed',
};

const BY_MESSAGE: [RegExp, string][] = [
  [/^Command timed out/, 'commands time out (redis.command_timeout_ms)'],
  [/enableOfflineQueue|Connection is closed|Stream isn't writeable/, 'not connected'],
  [/^(NOAUTH|WRONGPASS)|invalid password|AUTH/i, 'authentication failed: check the credentials in REDIS_URL'],
  [/^LOADING/, 'Redis is loading its dataset'],
  [/^READONLY/, 'connected to a read-only replica'],
  [/^MASTERDOWN/, 'the replica lost its master'],
  [/^CLUSTERDOWN/, 'the cluster is down'],
  [/All sentinels are unreachable/, 'no sentinel answers'],
  [/(master|primary).*(not found|unknown)|No master/i, 'the sentinels do not know the master group (REDIS_SENTINEL_MASTER)'],
];

/** Generic causes that a more specific connection error, seen just before, explains better. */
export const VAGUE_CAUSES = new Set(['not connected', 'connection closed']);

/**
 * One short cause for a store failure, in operator words rather than the client library's
 * ("connection refused", "commands time out"); never a stack, never credentials.
 */
export function describeStoreError(error: unknown): string {
  const inner = error instanceof StoreUnavailableError ? error.cause : error;
  const code = (inner as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && BY_CODE[code]) return BY_CODE[code];
  const message = inner instanceof Error ? inner.message : String(inner);
  for (const [pattern, cause] of BY_MESSAGE) if (pattern.test(message)) return cause;
  return message.split('\n')[0]!.slice(0, 200);
}

/**
 * A settlement that failed because the store was unreachable. `fence` names it when it was sent and
 * may still run (a command that timed out runs when a hung Redis resumes); null when it never left.
 */
export class SettlementFailedError extends StoreUnavailableError {
  constructor(
    cause: unknown,
    readonly fence: SettleFence | null,
  ) {
    super(cause);
  }
}
