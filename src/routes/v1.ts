import type { FastifyPluginAsync } from 'fastify';
import type { AppContext } from '../app-context.js';
import { apiKeyRoutes } from './api-keys.js';

/** Everything under /v1: authenticated by a project key before any handler runs. */
export const v1Routes: FastifyPluginAsync<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.decorateRequest('principal', null);
  app.addHook('preHandler', async (request) => {
    request.principal = await ctx.authenticator.authenticate(request.headers.authorization, request.ip);
  });
  await app.register(apiKeyRoutes, { ctx });
};
