import { readFileSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { RawConnection, responsesIn } from '../support/raw-http.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const MiB = 1024 * 1024;
// Stalled bodies of the old code were held until this deadline; long enough to outlast each measurement.
const BODY_TIMEOUT_MS = 20_000;
const FAILED_ATTEMPTS_MAX = 3;

/** ~0.9 MB of JSON with 70,000 keys: costly to parse, and under the default 1 MiB body limit. */
const MANY_KEYS = Buffer.from(
  `{${Array.from({ length: 70_000 }, (_, i) => `"k${String(i).padStart(6, '0')}":${i % 1000}`).join(',')}}`,
  'latin1',
);

const postHead = (path: string, length: number | 'chunked', extra = '') =>
  `POST ${path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n${extra}` +
  (length === 'chunked' ? 'Transfer-Encoding: chunked\r\n\r\n' : `Content-Length: ${length}\r\n\r\n`);

function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match![1]) * 1024;
}

/** Samples the process's RSS until stopped; returns the highest seen. */
function rssPeak(pid: number): { stop(): number } {
  let peak = rssBytes(pid);
  const timer = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 50);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, rssBytes(pid));
    },
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** GET /livez every 50 ms on one kept-alive connection, as another client would; latencies in ms. */
function livezProbe(port: number): { stop(): Promise<number[]> } {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      await new Promise<void>((resolve) => {
        const request = get({ host: '127.0.0.1', port, path: '/livez', agent, timeout: 10_000 }, (response) => {
          response.resume();
          response.once('end', () => {
            latencies.push(performance.now() - started);
            resolve();
          });
        });
        request.once('timeout', () => request.destroy());
        request.once('error', () => resolve());
      });
      await sleep(50);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      agent.destroy();
      return latencies;
    },
  };
}

/** Writes a head and a body on a fresh socket and resolves with what came back once the socket closes (or `timeoutMs`). */
function sendUnauthenticated(port: number, head: string, body: Buffer, timeoutMs: number): Promise<{ data: string; socket: Socket }> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      data += chunk;
      // A whole answer: done (the old code keeps the connection alive after it).
      if (/\r\n\r\n\{.*\}$/s.test(data)) socket.destroy();
    });
    socket.on('error', () => {});
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve({ data, socket });
    });
    socket.write(head, 'latin1');
    socket.write(body);
  });
}

/**
 * Issue 30, "Bounded before authenticated" (../shared/DESIGN.md section 7): without a valid key a
 * client gets its 401 on the headers; its body is neither read nor parsed, so floods of costly or
 * stalled bodies leave the event loop and the memory of the real process alone.
 */
describe('unauthenticated floods against the real process', () => {
  let gateway: GatewayProcess;
  let pid: number;

  beforeAll(async () => {
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'warn' },
      configYaml: `
models:
  - id: echo-1
    provider: echo
server:
  body_timeout_ms: ${BODY_TIMEOUT_MS}
  # Above the 50 MB body below, so that only authentication can keep it unread.
  body_limit_bytes: ${64 * MiB}
auth:
  failed_attempts:
    max: ${FAILED_ATTEMPTS_MAX}
    window_seconds: 60
    block_seconds: 60
redis:
  key_prefix: e2e${randomBase62(8)}
`,
    });
    pid = gateway.child.pid!;
  });

  afterAll(async () => {
    await gateway?.stop();
  });

  it('keeps /livez p50 under 50 ms and RSS growth under 100 MB through a flood of 1 MB, 70k-key bodies without a key', async () => {
    const before = rssBytes(pid);
    const peak = rssPeak(pid);
    const probe = livezProbe(gateway.port);
    const statuses: number[] = [];
    const until = Date.now() + 4000;
    // Six connections, each sending its next body once the last one was answered (or its socket closed).
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        while (Date.now() < until) {
          const { data } = await sendUnauthenticated(gateway.port, postHead('/v1/chat/completions', MANY_KEYS.length), MANY_KEYS, 5000);
          statuses.push(...responsesIn(data).map((response) => response.status));
          await sleep(5);
        }
      }),
    );
    const latencies = await probe.stop();
    const growth = peak.stop() - before;
    console.info(
      `flood: ${statuses.length} bodies answered; /livez p50 ${median(latencies).toFixed(1)} ms over ${latencies.length} probes; RSS +${(growth / MiB).toFixed(0)} MB`,
    );

    expect(statuses.length).toBeGreaterThan(20);
    expect(new Set(statuses)).toEqual(new Set([401]));
    expect(latencies.length).toBeGreaterThan(10);
    expect(median(latencies)).toBeLessThan(50);
    expect(growth).toBeLessThan(100 * MiB);
  });

  it('ends 600 stalled 1 MB bodies without a key at once (401, or the reset of a client still writing), RSS growth under 100 MB', async () => {
    const length = 1_000_000;
    const part = Buffer.alloc(length - 1000, 'a');
    const before = rssBytes(pid);
    const peak = rssPeak(pid);
    const connections = await Promise.all(Array.from({ length: 600 }, () => RawConnection.open(gateway.port)));
    const answerTimes: Array<Promise<number | null>> = [];
    for (const connection of connections) {
      const sentAt = Date.now();
      answerTimes.push(
        new Promise((resolve) => {
          connection.socket.once('data', () => resolve(Date.now() - sentAt));
          connection.socket.once('close', () => resolve(null));
        }),
      );
      // The head and most of the body in one go, then nothing more.
      connection.write(postHead('/v1/chat/completions', length));
      connection.socket.write(part);
    }
    // Each should be answered and closed at once; the old code held them until the body timeout.
    const outcomes = await Promise.all(connections.map((connection) => connection.outcome(6000)));
    const growth = peak.stop() - before;
    const answered = (await Promise.all(answerTimes)).filter((ms) => ms !== null);
    console.info(
      `stalled: ${answered.length}/600 answered, first byte p50 ${answered.length ? median(answered) : NaN} ms, max ${Math.max(...answered)} ms; RSS +${(growth / MiB).toFixed(0)} MB`,
    );

    // Every connection is ended by the server at once. Closing with the body unread resets the
    // connection (RFC 9112 section 9.6), so a client whose bytes were still in flight may see the
    // reset before the 401 (README, "Authentication before the body"); what is read is the 401.
    expect(answered.length).toBeGreaterThan(0);
    expect(Math.max(...answered)).toBeLessThan(5000);
    for (const outcome of outcomes) {
      expect(outcome.closedByServer).toBe(true);
      if (outcome.data === '') continue;
      expect(responsesIn(outcome.data)).toEqual([
        { status: 401, body: { error: expect.objectContaining({ code: 'missing_api_key', type: 'authentication_error' }) } },
      ]);
      expect(outcome.data).toMatch(/\r\nconnection: close\r\n/i);
      expect(outcome.data).toMatch(/\r\nx-request-id: \S+\r\n/i);
    }
    expect(growth).toBeLessThan(100 * MiB);
  }, 30_000);

  it('never reads a 50 MB body without a key: the 401 comes on the headers, then the body cannot be pushed through', async () => {
    const connection = await RawConnection.open(gateway.port);
    const { socket } = connection;
    const answered = new Promise((resolve) => socket.once('data', resolve));
    connection.write(postHead('/v1/chat/completions', 50 * MiB));
    // The answer comes before any body byte is sent: a client still writing could see the reset first.
    const early = await Promise.race([answered.then(() => true), sleep(2000).then(() => false)]);
    // Each MiB is handed to the kernel once the last one was; what the server does not read stays in socket buffers.
    const chunk = Buffer.alloc(MiB, ' ');
    let flushed = 0;
    for (let i = 0; i < 50 && !socket.destroyed; i++) {
      const wrote = await Promise.race([
        new Promise<boolean>((resolve) => socket.write(chunk, (error) => resolve(!error))),
        sleep(2000).then(() => false),
      ]);
      if (!wrote) break;
      flushed += MiB;
    }
    const outcome = await connection.outcome(5000);
    console.info(`50 MB body: answered before the body ${early}; ${flushed / MiB} MiB flushed`);

    expect(early).toBe(true);
    expect(outcome.closedByServer).toBe(true);
    expect(responsesIn(outcome.data)).toEqual([{ status: 401, body: { error: expect.objectContaining({ code: 'missing_api_key' }) } }]);
    expect(outcome.data).toMatch(/\r\nconnection: close\r\n/i);
    // Loopback socket buffers hold a few MiB at most; a server reading the body would let all 50 through.
    expect(flushed).toBeLessThan(20 * MiB);
  });

  it('refuses a body without a key on its headers: nothing is parsed, not even JSON that is invalid or too deep', async () => {
    for (const body of ['{"model": ', `${'['.repeat(500)}${']'.repeat(500)}`]) {
      const connection = await RawConnection.open(gateway.port);
      connection.write(`${postHead('/v1/chat/completions', Buffer.byteLength(body))}${body}`);
      const outcome = await connection.outcome(1000);
      expect(responsesIn(outcome.data)).toEqual([{ status: 401, body: { error: expect.objectContaining({ code: 'missing_api_key' }) } }]);
    }
  });

  it('keeps the connection of a refused request that has no body pending', async () => {
    const connection = await RawConnection.open(gateway.port);
    connection.write('GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
    const outcome = await connection.outcome(2000);
    expect(responsesIn(outcome.data).map((response) => response.status)).toEqual([401, 401]);
  });

  it('throttles failed keys on the headers too: 401 then 429 with Retry-After, the pending body unread and the connection closed', async () => {
    // Its own address, so the block does not reach the other tests.
    const localAddress = '127.0.0.7';
    const seen: string[] = [];
    for (let i = 0; i <= FAILED_ATTEMPTS_MAX; i++) {
      const connection = await RawConnection.open(gateway.port, { localAddress });
      connection.write(postHead('/v1/chat/completions', 100_000, `Authorization: Bearer nova_sk_${randomBase62(40)}\r\n`));
      seen.push((await connection.outcome(2000)).data);
    }
    const statuses = seen.map((data) => responsesIn(data)[0]?.status);
    expect(statuses.slice(0, FAILED_ATTEMPTS_MAX)).toEqual(Array(FAILED_ATTEMPTS_MAX).fill(401));
    expect(statuses.at(-1)).toBe(429);
    expect(seen.at(-1)).toMatch(/\r\nretry-after: \d+\r\n/i);
    for (const data of seen) expect(data).toMatch(/\r\nconnection: close\r\n/i);
  });

  it('refuses a wrong admin token on its headers, closing a connection whose body is pending', async () => {
    const connection = await RawConnection.open(gateway.port, { localAddress: '127.0.0.8' });
    connection.write(postHead('/admin/v1/projects', 100_000, 'Authorization: Bearer not-the-admin-token\r\n'));
    const outcome = await connection.outcome(2000);
    expect(outcome.closedByServer).toBe(true);
    expect(responsesIn(outcome.data)).toEqual([{ status: 401, body: { error: expect.objectContaining({ code: 'invalid_api_key' }) } }]);
    expect(outcome.data).toMatch(/\r\nconnection: close\r\n/i);
  });
});
