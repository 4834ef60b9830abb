import type { TestProject } from 'vitest/node';
import { provideRedis } from './redis-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

export default async function setup(project: TestProject) {
  const redis = await provideRedis();
  project.provide('redisUrl', redis.url);
  return () => redis.stop();
}
