import type { Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient, inOneWrite, waitUntilReady, type RedisClient } from '../../src/store/redis/connect.js';
import { RedisProcess } from '../support/redis-server.js';

/** Counts the socket's writes to the kernel: `_write` for one chunk, `_writev` for several at once. */
function countWrites(socket: Socket): { single: number; batched: number } {
  const counts = { single: 0, batched: 0 };
  const writable = socket as unknown as { _write: (...args: unknown[]) => void; _writev: (...args: unknown[]) => void };
  const write = writable._write.bind(socket);
  const writev = writable._writev.bind(socket);
  writable._write = (...args) => {
    counts.single++;
    write(...args);
  };
  writable._writev = (...args) => {
    counts.batched++;
    writev(...args);
  };
  return counts;
}

describe('inOneWrite', () => {
  let redis: RedisProcess;
  let client: RedisClient;
  beforeAll(async () => {
    redis = await RedisProcess.start();
    client = createRedisClient({ url: redis.url, mode: 'standalone', commandTimeoutMs: 2000 });
    await waitUntilReady(client, 5000);
  });
  afterAll(async () => {
    client.disconnect();
    await redis.stop();
  });

  it('sends the commands issued inside it in one write, each with its own reply, in order', async () => {
    const counts = countWrites((client as Redis).stream as Socket);
    let replies: Promise<unknown>[] = [];
    inOneWrite(client, () => {
      replies = [client.set('one-write:a', '1'), client.incr('one-write:a'), client.hget('one-write:a', 'x').catch((error: Error) => error.message), client.get('one-write:a')];
    });
    expect(counts).toEqual({ single: 0, batched: 1 });
    expect(await Promise.all(replies)).toEqual(['OK', 2, expect.stringMatching(/WRONGTYPE/), '2']);
    // Outside it, each command is a write of its own.
    await Promise.all([client.get('one-write:a'), client.get('one-write:a')]);
    expect(counts).toEqual({ single: 2, batched: 1 });
  });
});
