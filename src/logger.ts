import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * Secrets never reach a log line: headers are not logged by default, and these paths
 * are censored wherever a caller might log a request, a reply or a key.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'headers.authorization',
  'secret',
  '*.secret',
  'api_key.secret',
  '*.api_key.secret',
  'adminToken',
  'redisUrl',
];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, destination);
}
