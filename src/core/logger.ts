import { pino, type DestinationStream, type Logger } from 'pino';
import { LogDestination } from './log-destination.js';

/** Log bytes held while the log's reader (stdout's pipe) does not keep up; lines beyond are dropped. */
export const MAX_PENDING_LOG_BYTES = 16 * 1024 * 1024;

/**
 * Secrets never reach a log line: headers are not logged by default, and these paths
 * are censored wherever a caller might log a request, a reply or a key.
 */
export const REDACTED_PATHS = ['req.headers.authorization', 'headers.authorization', 'secret', '*.secret', 'api_key.secret'];

/**
 * Lines go to the file descriptor (stdout by default) in blocks, from the event loop's thread (see
 * LogDestination); while the reader stalls, at most `maxPendingBytes` wait, and a line beyond is
 * dropped and reported to `onDropped`.
 */
export function logDestination(onDropped: (lines: number) => void, fd = 1, maxPendingBytes = MAX_PENDING_LOG_BYTES): DestinationStream {
  return new LogDestination(fd, maxPendingBytes, onDropped);
}

/** Call flushLogger before exiting. */
export function createLogger(level: string, destination: DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, destination);
}

/** How long an exit waits for the log's reader to take the last lines (a stalled reader would hold the exit forever). */
export const LOG_FLUSH_TIMEOUT_MS = 2000;

/** Resolves once what was logged has left, or after `timeoutMs`, whichever comes first. */
export function flushLogger(logger: Logger, timeoutMs = LOG_FLUSH_TIMEOUT_MS): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    logger.flush(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
