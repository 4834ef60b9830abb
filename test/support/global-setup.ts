import type { TestProject } from 'vitest/node';
import { buildConsoleIfStale } from '../../scripts/build-if-stale.mjs';
import { provideRedis } from './redis-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

export default async function setup(project: TestProject) {
  // The web console is built once, here, before the suites run: the browser test serves dist/console,
  // and `npm start` in test/process would otherwise rebuild (and empty) it while that test reads it.
  buildConsoleIfStale(new URL('../../', import.meta.url).pathname);
  const redis = await provideRedis();
  project.provide('redisUrl', redis.url);
  return () => redis.stop();
}
