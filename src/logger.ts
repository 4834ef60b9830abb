import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * Secrets never reach a log line: headers are not logged by default, and these paths
 * are censored wherever a caller might log a request, a reply or a key.
 */
export const REDACTED_PATHS = ['req.headers.authorization', 'headers.authorization', 'secret', '*.secret', 'api_key.secret'];

/**
 * Lines go to stdout asynchronously and in blocks: they leave once 4 KiB are waiting or every
 * 200 ms, whichever comes first, so that a busy gateway pays one write for a dozen access lines
 * instead of one each. Call flushLogger before exiting.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    { level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } },
    destination ?? pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 200 }),
  );
}

export function flushLogger(logger: Logger): Promise<void> {
  return new Promise((resolve) => logger.flush(() => resolve()));
}
