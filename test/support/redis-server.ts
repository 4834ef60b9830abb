import { spawnSync, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { RedisProcess, waitForRedis } from '../../scripts/redis-process.js';

// The child-process helpers live in scripts/ for bench/ too; the tests import them from here.
export { freePort } from '../../scripts/free-port.js';
export { RedisProcess, waitForRedis } from '../../scripts/redis-process.js';

/** Kills the processes of a cluster or sentinel group (SIGKILL) and resolves when each has exited. */
export async function killAll(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }),
  );
}

/** One command to the Redis (or sentinel) on a loopback port, on a connection of its own. */
export async function askRedis(port: number, command: string[]): Promise<unknown> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call(command[0]!, ...command.slice(1));
  } finally {
    client.disconnect();
  }
}

/** Checks every 100 ms until `check` holds; after `timeoutMs`, throws naming `what`. */
export async function pollUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms`);
    await sleep(100);
  }
}

export function hasRedisServerBinary(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * The Redis the suites share: REDIS_URL when set, else a redis-server binary on a free
 * port, else a container when Docker answers; otherwise fail, naming the three ways.
 */
export async function provideRedis(): Promise<{ url: string; stop: () => Promise<void> }> {
  if (process.env.REDIS_URL) {
    await waitForRedis(process.env.REDIS_URL);
    return { url: process.env.REDIS_URL, stop: async () => undefined };
  }
  if (hasRedisServerBinary()) {
    const redis = await RedisProcess.start();
    return { url: redis.url, stop: () => redis.stop() };
  }
  try {
    const { GenericContainer, Wait } = await import('testcontainers');
    const container = await new GenericContainer('redis:7-alpine')
      .withExposedPorts(6379)
      .withWaitStrategy(Wait.forLogMessage('Ready to accept connections'))
      .start();
    const url = `redis://${container.getHost()}:${container.getMappedPort(6379)}`;
    return { url, stop: async () => void (await container.stop()) };
  } catch (error) {
    throw new Error(
      'The tests need Redis: set REDIS_URL, or put redis-server on the PATH (apt-get install redis-server), ' +
        `or run a Docker engine for testcontainers. (testcontainers said: ${(error as Error).message})`,
    );
  }
}
