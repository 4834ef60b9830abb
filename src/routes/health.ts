import type { FastifyPluginAsync } from 'fastify';
import type { AppContext } from './app-context.js';

/** Probes: liveness is the process alone; readiness also needs the store and no drain. */
export const healthRoutes: FastifyPluginAsync<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.get('/livez', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    if (ctx.lifecycle.draining) return reply.code(503).send({ status: 'draining' });
    try {
      await ctx.store.ping();
    } catch {
      return reply.code(503).send({ status: 'store_unavailable' });
    }
    return { status: 'ready' };
  });
};
