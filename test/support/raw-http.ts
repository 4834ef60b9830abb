import { connect, type Socket } from 'node:net';

/** What a raw socket saw from the server: the bytes, and when the first came and the socket closed. */
export interface RawOutcome {
  data: string;
  /** Whether the server closed the connection (false: still open at the deadline, then closed by us). */
  closedByServer: boolean;
  firstByteAfterMs: number | null;
  closedAfterMs: number;
}

/** A socket to the gateway that writes what a test scripts and records what comes back. */
export class RawConnection {
  private data = '';
  private firstByteAt: number | null = null;
  private readonly startedAt = Date.now();
  private readonly closed: Promise<number>;
  private closedByServer = true;

  private constructor(readonly socket: Socket) {
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      this.firstByteAt ??= Date.now();
      this.data += chunk;
    });
    socket.on('error', () => {});
    this.closed = new Promise((resolve) => socket.once('close', () => resolve(Date.now())));
  }

  static open(port: number, options: { localAddress?: string } = {}): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host: '127.0.0.1', localAddress: options.localAddress });
      const connection = new RawConnection(socket);
      socket.once('connect', () => resolve(connection));
      socket.once('error', reject);
    });
  }

  write(bytes: string): void {
    this.socket.write(bytes, 'latin1');
  }

  /** Waits until the server closes the socket or `timeoutMs` passes (then closes it itself). */
  async outcome(timeoutMs: number): Promise<RawOutcome> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'deadline'>((resolve) => (timer = setTimeout(() => resolve('deadline'), timeoutMs)));
    let closedAt = await Promise.race([this.closed, deadline]);
    clearTimeout(timer);
    if (closedAt === 'deadline') {
      this.closedByServer = false;
      this.socket.destroy();
      closedAt = await this.closed;
    }
    return {
      data: this.data,
      closedByServer: this.closedByServer,
      firstByteAfterMs: this.firstByteAt === null ? null : this.firstByteAt - this.startedAt,
      closedAfterMs: closedAt - this.startedAt,
    };
  }
}

/** The HTTP responses in raw bytes: status codes in order, and each JSON body that parses. */
export function responsesIn(raw: string): Array<{ status: number; body: unknown }> {
  return raw
    .split(/(?=HTTP\/1\.[01] \d{3} )/)
    .filter((part) => part.startsWith('HTTP/'))
    .map((part) => {
      const status = Number(part.slice(9, 12));
      const text = part.slice(part.indexOf('\r\n\r\n') + 4);
      try {
        return { status, body: JSON.parse(text) as unknown };
      } catch {
        return { status, body: text };
      }
    });
}
