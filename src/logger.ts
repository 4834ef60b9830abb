import { pino, type DestinationStream, type Logger } from 'pino';

/** Log bytes held while the log's reader (stdout's pipe) does not keep up; lines beyond are dropped. */
export const MAX_PENDING_LOG_BYTES = 16 * 1024 * 1024;

/**
 * Secrets never reach a log line: headers are not logged by default, and these paths
 * are censored wherever a caller might log a request, a reply or a key.
 */
export const REDACTED_PATHS = ['req.headers.authorization', 'headers.authorization', 'secret', '*.secret', 'api_key.secret'];

/**
 * Lines go to the file descriptor (stdout by default) asynchronously and in blocks: they leave once
 * 4 KiB are waiting or every 200 ms, whichever comes first, so that a busy gateway pays one write
 * for a dozen access lines instead of one each. While the reader stalls, at most `maxPendingBytes`
 * wait; a line beyond is dropped and reported to `onDropped`, so that a stalled log pipe costs lines,
 * not unbounded memory.
 */
export function logDestination(onDropped: () => void, fd = 1, maxPendingBytes = MAX_PENDING_LOG_BYTES): DestinationStream {
  const destination = pino.destination({ dest: fd, sync: false, minLength: 4096, periodicFlush: 200, maxLength: maxPendingBytes });
  destination.on('drop', onDropped);
  return destination;
}

/** Call flushLogger before exiting. */
export function createLogger(level: string, destination: DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, destination);
}

export function flushLogger(logger: Logger): Promise<void> {
  return new Promise((resolve) => logger.flush(() => resolve()));
}
