import { execFileSync } from 'node:child_process';
import { constants, closeSync, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger, flushLogger, logDestination } from '../../src/logger.js';

describe('log destination', () => {
  it('holds at most its bound while the reader stalls, drops and counts the rest, then delivers what it held', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nova-log-'));
    const fifo = join(dir, 'stdout');
    execFileSync('mkfifo', [fifo]);
    // The reader opens first (non-blocking) and reads nothing until the end: a stalled log pipe.
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writer = openSync(fifo, constants.O_WRONLY);
    let dropped = 0;
    const bound = 256 * 1024;
    const logger = createLogger('info', logDestination(() => dropped++, writer, bound));
    const line = 'x'.repeat(1000);
    const lines = 2000; // ~2 MB: the pipe's buffer (64 KiB) and the bound (256 KiB) are far smaller
    for (let i = 0; i < lines; i++) logger.info({ i }, line);
    expect(dropped).toBeGreaterThan(lines / 2);
    // What is held stays within the bound: the pipe plus the bound, at most.
    let received = '';
    const chunk = Buffer.alloc(1 << 16);
    const flushed = flushLogger(logger);
    const deadline = Date.now() + 10_000;
    let done = false;
    void flushed.then(() => (done = true));
    while (Date.now() < deadline) {
      let read = 0;
      try {
        read = readSync(reader, chunk);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      }
      received += chunk.toString('utf8', 0, read);
      if (read === 0) {
        if (done) break;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
    const delivered = received.split('\n').filter(Boolean);
    expect(delivered.length + dropped).toBe(lines);
    expect(received.length).toBeLessThanOrEqual(bound + 64 * 1024 + 2 * 1100);
    // Every delivered line is whole and parses.
    for (const text of delivered) expect(JSON.parse(text).msg).toBe(line);
    closeSync(reader);
    closeSync(writer);
    rmSync(dir, { recursive: true, force: true });
  });
});
