import { execFileSync } from 'node:child_process';
import { constants, closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger, flushLogger, logDestination } from '../../src/core/logger.js';

/** A named pipe as a log's stdout: its reader opened first (non-blocking), then its writer. */
function logPipe(): { dir: string; reader: number; writer: number } {
  const dir = mkdtempSync(join(tmpdir(), 'nova-log-'));
  const fifo = join(dir, 'stdout');
  execFileSync('mkfifo', [fifo]);
  const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  return { dir, reader, writer: openSync(fifo, constants.O_WRONLY) };
}

describe('log destination', () => {
  it('holds at most its bound while the reader stalls, drops and counts the rest, then delivers what it held', async () => {
    // The reader reads nothing until the end: a stalled log pipe.
    const { dir, reader, writer } = logPipe();
    let dropped = 0;
    const bound = 256 * 1024;
    const logger = createLogger('info', logDestination((lines) => (dropped += lines), writer, bound));
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

  it('stops waiting for a stalled reader after the flush timeout, so an exit is not held forever', async () => {
    const { dir, reader, writer } = logPipe();
    const logger = createLogger('info', logDestination(() => undefined, writer));
    // More than the pipe holds: the rest waits in the stream's queue, which a stalled reader never empties.
    for (let i = 0; i < 200; i++) logger.info({ i }, 'x'.repeat(1000));
    await flushLogger(logger, 50);
    // Resolved while lines were still queued: once the reader empties the pipe, more arrive.
    const chunk = Buffer.alloc(1 << 17);
    const readAll = () => {
      let total = 0;
      for (;;) {
        try {
          const read = readSync(reader, chunk);
          if (read === 0) return total;
          total += read;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'EAGAIN') return total;
          throw error;
        }
      }
    };
    expect(readAll()).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(readAll()).toBeGreaterThan(0);
    closeSync(reader);
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes a file in blocks: nothing until a block is full or flushed, then every line whole and in order', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nova-log-'));
    const path = join(dir, 'log');
    const fd = openSync(path, 'w');
    let dropped = 0;
    const logger = createLogger('info', logDestination((lines) => (dropped += lines), fd));
    logger.info({ i: 0 }, 'short');
    expect(readFileSync(path, 'utf8')).toBe('');
    // About 50 bytes a line: a 4 KiB block leaves by itself before the 100th line.
    for (let i = 1; i < 100; i++) logger.info({ i }, 'short');
    const early = readFileSync(path, 'utf8');
    expect(early.length).toBeGreaterThanOrEqual(4096);
    await flushLogger(logger);
    const lines = readFileSync(path, 'utf8').split('\n').filter(Boolean);
    expect(lines.map((text) => JSON.parse(text).i)).toEqual([...Array(100).keys()]);
    expect(dropped).toBe(0);
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  });

  it('finishes a short write to a file, and counts exactly the lines it could not write whole (a file size limit)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'nova-log-'));
    const path = join(dir, 'log');
    const script = join(dir, 'write.mts');
    const lines = 300;
    writeFileSync(
      script,
      `import { createLogger, flushLogger, logDestination } from ${JSON.stringify(join(__dirname, '../../src/core/logger.ts'))};
      import { openSync } from 'node:fs';
      let dropped = 0;
      const logger = createLogger('info', logDestination((count) => (dropped += count), openSync(${JSON.stringify(path)}, 'w')));
      for (let i = 0; i < ${lines}; i++) logger.info({ i }, 'line of the log '.repeat(3));
      await flushLogger(logger);
      process.stdout.write(String(dropped));`,
    );
    // A file size limit (bash counts it in KiB): writes past it are cut short, then refused (Node ignores SIGXFSZ).
    const dropped = Number(execFileSync('bash', ['-c', `ulimit -f 10 && exec "${process.execPath}" --import tsx "${script}"`], { cwd: join(__dirname, '../..') }).toString());
    const text = readFileSync(path, 'utf8');
    expect(text.length).toBe(10 * 1024);
    const whole = text.split('\n').slice(0, -1);
    for (const line of whole) expect(JSON.parse(line).msg).toContain('line of the log');
    expect(dropped).toBeGreaterThan(0);
    expect(whole.length + dropped).toBe(lines);
    rmSync(dir, { recursive: true, force: true });
  });

  it('writes what it holds when the process exits', () => {
    const dir = mkdtempSync(join(tmpdir(), 'nova-log-'));
    const path = join(dir, 'log');
    const script = `
      import { createLogger, logDestination } from './src/core/logger.ts';
      import { openSync } from 'node:fs';
      const logger = createLogger('info', logDestination(() => {}, openSync(${JSON.stringify(path)}, 'w')));
      logger.info('first');
      logger.info('last');
      process.exit(3);
    `;
    let status = 0;
    try {
      execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: join(__dirname, '../..') });
    } catch (error) {
      status = (error as { status: number }).status;
    }
    expect(status).toBe(3);
    expect(readFileSync(path, 'utf8').split('\n').filter(Boolean).map((text) => JSON.parse(text).msg)).toEqual(['first', 'last']);
    rmSync(dir, { recursive: true, force: true });
  });

  it('counts the lines it cannot deliver once the reader is gone, and keeps the process alive', async () => {
    const { dir, reader, writer } = logPipe();
    closeSync(reader);
    let dropped = 0;
    const logger = createLogger('info', logDestination((lines) => (dropped += lines), writer));
    const line = 'x'.repeat(100);
    // The first block meets the broken pipe; the lines after it are dropped.
    for (let i = 0; i < 100; i++) logger.info({ i }, line);
    await new Promise((resolve) => setTimeout(resolve, 20));
    for (let i = 0; i < 10; i++) logger.info({ i }, line);
    await flushLogger(logger);
    // Every line: those in the block the pipe refused, those queued behind it, and those after.
    expect(dropped).toBe(110);
    // The writer's descriptor is not closed here: the stream closed it when the pipe broke.
    rmSync(dir, { recursive: true, force: true });
  });
});
