import { spawnSync } from 'node:child_process';
import { RedisProcess, waitForRedis } from '../../scripts/redis-process.js';

// The child-process helpers live in scripts/ for bench/ too; the tests import them from here.
export { freePort } from '../../scripts/free-port.js';
export { RedisProcess, waitForRedis } from '../../scripts/redis-process.js';

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
