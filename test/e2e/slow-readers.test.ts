import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import type { TestProject } from '../support/test-app.js';

const MB = 1_000_000;
const REPLY_BYTES = 30 * MB;
const WRITE_TIMEOUT_MS = 5000;
const MAX_BUFFERED = 80 * MB;
const ADMIN_TOKEN = `admin-${randomBase62(20)}`;

/** An embeddings reply of about REPLY_BYTES, relayed as the upstream sent it (src/model-call/json-relay.ts). */
const BIG_REPLY = `{"object":"list","model":"m","data":[{"object":"embedding","index":0,"embedding":"${'A'.repeat(REPLY_BYTES)}"}],"usage":{"prompt_tokens":1,"total_tokens":1}}`;

function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('VmRSS:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) * 1024;
}

/** A client that sends one request and reads no more than the first chunk of the answer (its status line). */
class NonReader {
  status: number | null = null;
  received = 0;
  readonly answered: Promise<number>;
  private readonly socket: Socket;
  private readonly closed: Promise<void>;

  constructor(port: number, project: TestProject) {
    this.socket = connect({ port, host: '127.0.0.1' });
    this.socket.on('error', () => undefined);
    this.closed = new Promise((resolve) => this.socket.once('close', () => resolve()));
    this.answered = new Promise((resolve) =>
      this.socket.once('data', (chunk: Buffer) => {
        this.socket.pause();
        this.received += chunk.length;
        this.status = Number(chunk.toString('latin1', 9, 12));
        resolve(this.status);
      }),
    );
    const body = JSON.stringify({ model: 'big-1', input: 'hello' });
    this.socket.write(
      `POST /v1/embeddings HTTP/1.1\r\nhost: gateway\r\n${project.auth.authorization ? `authorization: ${project.auth.authorization}\r\n` : ''}` +
        `content-type: application/json\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }

  /** Reads what is left until the server closes the connection (a paused socket never sees its end); the bytes received in all. */
  async readRest(timeoutMs = 10_000): Promise<number> {
    this.socket.on('data', (chunk: Buffer) => (this.received += chunk.length));
    this.socket.resume();
    const timer = setTimeout(() => this.socket.destroy(), timeoutMs);
    await this.closed;
    clearTimeout(timer);
    return this.received;
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/**
 * Clients that ask for 30 MB replies and never read them (issue 30): a reply waiting for its
 * reader keeps its concurrency slot, so the project's max_concurrent_requests bounds how many
 * such replies the replica holds; the write timeout drops them, which frees the slots; beyond
 * server.max_buffered_reply_bytes the slowest readers are dropped first.
 */
describe('slow readers of 30 MB replies (real process, real Redis)', () => {
  let upstream: LoopbackUpstream;
  let gateway: GatewayProcess;
  const open: NonReader[] = [];

  const metric = async (name: string, labels = ''): Promise<number> => {
    const text = await (await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`)).text();
    const line = text.split('\n').find((entry) => entry.startsWith(`${name}${labels} `));
    return line === undefined ? 0 : Number(line.split(' ')[1]);
  };
  const projectWith = async (name: string, maxConcurrent: number): Promise<TestProject> => {
    const project = await gateway.createProject({ name });
    const patched = await fetch(`${gateway.url}/admin/v1/projects/${project.projectId}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ max_concurrent_requests: maxConcurrent }),
    });
    expect(patched.status).toBe(200);
    return project;
  };
  const nonReader = (project: TestProject) => {
    const client = new NonReader(gateway.port, project);
    open.push(client);
    return client;
  };
  const until = async (check: () => boolean | Promise<boolean>, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('condition not met in time');
      await sleep(50);
    }
  };

  beforeAll(async () => {
    upstream = await LoopbackUpstream.start({ big: { body: BIG_REPLY } });
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN },
      configYaml: `
models:
  - id: big-1
    upstream: ${upstream.baseUrl('big')}
    endpoints: [embeddings]
  - id: echo-1
    provider: echo
server:
  write_timeout_ms: ${WRITE_TIMEOUT_MS}
  write_min_bytes_per_second: 1073741824
  max_buffered_reply_bytes: ${MAX_BUFFERED}
redis:
  key_prefix: slow${randomBase62(6)}
`,
    });
  }, 30_000);

  afterAll(async () => {
    for (const client of open) client.destroy();
    await gateway?.stop();
    await upstream?.close();
  });

  it('holds only the admitted replies, drops their readers after the write timeout and frees their slots', async () => {
    const project = await projectWith('slow readers', 2);
    const before = rssBytes(gateway.child.pid!);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(gateway.child.pid!))), 50);
    try {
      const first = [nonReader(project), nonReader(project)];
      expect(await Promise.all(first.map((client) => client.answered))).toEqual([200, 200]);
      // One after another, each once the one before was answered: a slot freed when the upstream
      // answered, not when the reply was written, would admit every one of them.
      const statuses: number[] = [];
      for (let n = 0; n < 18; n++) statuses.push(await nonReader(project).answered);
      await sleep(500);
      const buffered = await metric('nova_reply_buffered_bytes');
      console.log(
        `slow readers: RSS ${(before / MB).toFixed(0)} -> peak ${(peak / MB).toFixed(0)} MB; buffered ${(buffered / MB).toFixed(1)} MB; ` +
          `${statuses.filter((status) => status === 429).length} of 18 refused`,
      );
      // With the slots held while the first two replies wait for their readers, the rest are refused.
      expect(statuses.filter((status) => status === 429)).toHaveLength(18);
      expect(buffered).toBeGreaterThan(20 * MB);
      expect(peak - before).toBeLessThan(300 * MB);

      // The write timeout drops the two that never read: counted, and their slots are free again.
      await until(async () => (await metric('nova_slow_readers_dropped_total', '{reason="write_timeout"}')) === 2, WRITE_TIMEOUT_MS + 5000);
      for (const client of first) expect(await client.readRest()).toBeLessThan(REPLY_BYTES);
      const after = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...project.auth, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(after.status).toBe(200);
      await after.text();
      await until(async () => (await metric('nova_reply_buffered_bytes')) === 0, 3000);
      // The episode's one warn line (the log reaches the test through the process's stdout, a little later).
      const warned = () => gateway.logs.filter((line) => line.includes('slow readers: dropping')).length;
      await until(() => warned() > 0, 5000);
      expect(warned()).toBe(1);
    } finally {
      clearInterval(sampler);
    }
  }, 60_000);

  it('over max_buffered_reply_bytes, drops the slowest readers first, before their write timeout', async () => {
    const project = await projectWith('pressure', 4);
    const clients = [nonReader(project), nonReader(project), nonReader(project), nonReader(project)];
    expect(await Promise.all(clients.map((client) => client.answered))).toEqual([200, 200, 200, 200]);
    // Four unread replies hold more than the 80 MB bound: some readers are dropped, well before the 5 s write timeout.
    const started = Date.now();
    await until(async () => (await metric('nova_slow_readers_dropped_total', '{reason="buffer_pressure"}')) >= 1, WRITE_TIMEOUT_MS);
    expect(Date.now() - started).toBeLessThan(WRITE_TIMEOUT_MS);
    await until(async () => (await metric('nova_reply_buffered_bytes')) <= MAX_BUFFERED, 2000);
    const dropped = await metric('nova_slow_readers_dropped_total', '{reason="buffer_pressure"}');
    expect(dropped).toBeLessThan(4);
    // The dropped ones are cut short; the others, once they read, get their whole reply.
    const received = await Promise.all(clients.map((client) => client.readRest(20_000)));
    expect(received.filter((bytes) => bytes < REPLY_BYTES)).toHaveLength(dropped);
    expect(received.filter((bytes) => bytes > REPLY_BYTES)).toHaveLength(4 - dropped);
  }, 60_000);
});
