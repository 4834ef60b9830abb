import { fstatSync, writeSync } from 'node:fs';
import { Socket } from 'node:net';

/** Lines leave once this many characters wait, or at the next tick of the flush interval. */
const BLOCK_CHARS = 4096;
const FLUSH_INTERVAL_MS = 200;
const NEWLINE = 0x0a;

/**
 * Log lines to a file descriptor, in blocks, written from the event loop's own thread.
 *
 * Why not an asynchronous `fs.write`: that hands every block to a libuv worker thread, and on a
 * gateway pinned to one core the hand-over and the wake-up back (two context switches a block)
 * cost more than the write itself, about 5% of a chat request's CPU in the benchmark.
 *
 * - A pipe or a socket (a container's stdout) is written through a non-blocking libuv stream: a
 *   block leaves at once when the reader keeps up, and otherwise waits in the stream's queue
 *   while the loop goes on. What waits (the queue and the block being gathered) stays within
 *   `maxPending` characters; a line beyond is dropped and reported to `onDropped`, so a stalled
 *   log reader costs lines, never unbounded memory or a blocked event loop.
 * - Anything else (a file, `/dev/null`, a terminal) is written synchronously, as pino's default
 *   destination does. A block such a write refuses (or a broken pipe) is dropped and counted; a
 *   short write is finished.
 */
export class LogDestination {
  private lines: string[] = [];
  private held = 0;
  private readonly socket: Socket | undefined;
  private broken = false;
  /** The last synchronous write stopped inside a line. */
  private tornLine = false;

  constructor(
    private readonly fd: number,
    private readonly maxPending: number,
    private readonly onDropped: (lines: number) => void,
  ) {
    const stat = fstatSync(fd);
    if (stat.isFIFO() || stat.isSocket()) {
      // libuv allows one handle per descriptor: stdout and stderr already have theirs.
      const std = fd === 1 ? process.stdout : fd === 2 ? process.stderr : undefined;
      this.socket = std instanceof Socket ? std : new Socket({ fd, readable: false, writable: true });
      this.socket.on('error', () => (this.broken = true));
    }
    setInterval(() => this.writeHeld(), FLUSH_INTERVAL_MS).unref();
    // Whatever is gathered when the process ends still leaves (a stream's write is tried at once).
    process.once('exit', () => this.writeHeld());
  }

  write(line: string): boolean {
    const waiting = this.held + (this.socket?.writableLength ?? 0);
    if (this.broken || waiting + line.length > this.maxPending) {
      this.onDropped(1);
      return false;
    }
    this.lines.push(line);
    this.held += line.length;
    if (this.held >= BLOCK_CHARS) this.writeHeld();
    return true;
  }

  /** Writes what is gathered; `done` is called once everything written so far has left. */
  flush(done?: (error?: Error) => void): void {
    this.writeHeld();
    if (!done) return;
    if (this.socket && !this.broken && this.socket.writableLength > 0) this.socket.write('', () => done());
    else done();
  }

  private writeHeld(): void {
    const count = this.lines.length;
    if (count === 0) return;
    const block = count === 1 ? this.lines[0]! : this.lines.join('');
    this.lines = [];
    this.held = 0;
    if (this.broken) return this.onDropped(count);
    if (this.socket) {
      // A block the pipe refuses (its reader gone), and every block queued behind it, is counted.
      this.socket.write(block, (error) => error && this.onDropped(count));
      return;
    }
    const text = this.tornLine ? `\n${block}` : block;
    this.tornLine = false;
    let written = 0;
    let bytes: Buffer | undefined;
    try {
      written = writeSync(this.fd, text);
      if (written < Buffer.byteLength(text)) {
        // A short write (a signal, a file reaching its size limit): the rest follows, so no line is torn.
        bytes = Buffer.from(text);
        while (written < bytes.length) written += writeSync(this.fd, bytes, written);
      }
    } catch {
      // EAGAIN from a descriptor someone set non-blocking, EPIPE, EIO, ENOSPC: the lines not wholly
      // written are lost and counted, not retried.
      if (bytes === undefined) {
        this.tornLine = text !== block;
        return this.onDropped(count);
      }
      let lost = 0;
      for (let at = bytes.indexOf(NEWLINE, written); at !== -1; at = bytes.indexOf(NEWLINE, at + 1)) lost++;
      this.onDropped(lost);
      // A line cut short is ended before the next block, so that the next line does not run into it.
      this.tornLine = bytes[written - 1] !== NEWLINE;
    }
  }
}
