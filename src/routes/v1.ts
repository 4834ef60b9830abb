import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { AuthenticatedKey } from '../auth/key-access.js';
import { consoleSessionOf, requireCsrf } from './console-auth.js';
import type { AppContext } from './app-context.js';
import { apiKeyRoutes } from './management/api-keys.js';
import { admitRequest } from './admission-hook.js';
import { closeIfBodyUnread } from '../auth/unread-body.js';
import { presentedKey } from '../auth/presented-key.js';
import { projectRoutes } from './management/projects.js';
import { assetRoutes } from './management/assets.js';
import { audioSpeechRoutes } from './model-traffic/audio-speech.js';
import { imageRoutes } from './model-traffic/images.js';
import { audioTranscriptionRoutes } from './model-traffic/audio-transcriptions.js';
import { fineTuningRoutes } from './model-traffic/fine-tuning.js';
import { chatRoutes } from './model-traffic/chat.js';
import { conversationRoutes } from './management/conversations.js';
import { modelRoutes } from './management/models.js';
import { completionRoutes } from './model-traffic/completions.js';
import { responseRoutes } from './model-traffic/responses.js';
import { messagesRoutes } from './model-traffic/messages.js';
import { requireScope } from '../auth/key-access.js';
import './route-scope.js';

/**
 * A console session's key (src/routes/console-auth.ts), on management routes only: a browser tab never
 * spends model traffic. Without a key session, the request has no key.
 */
async function sessionKey(ctx: AppContext, request: FastifyRequest): Promise<AuthenticatedKey> {
  const session = consoleSessionOf(ctx, request);
  if (session?.role !== 'key') return ctx.authenticator.authenticate(undefined, request.ip);
  const principal = await ctx.authenticator.authenticateHash(session.keyHash);
  requireCsrf(ctx, request, session);
  return principal;
}

/** Everything under /v1: authenticated by a project key before any handler runs. */
export const v1Routes: FastifyPluginAsync<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.decorateRequest('principal', null);
  app.decorateRequest('reservation', null);
  app.decorateRequest('charge', null);
  app.decorateRequest('projectPriority', null);
  // Model routes take long agent sessions (a coding agent's history grows each turn): their own body limit.
  app.addHook('onRoute', (route) => {
    if (route.config?.modelCall?.traffic === 'model' && route.bodyLimit === undefined) route.bodyLimit = ctx.config.server.model_body_limit_bytes;
    // Every /v1 route says which scope a key needs, or that it is open (null): none is open by omission.
    if (route.config?.scope === undefined) throw new Error(`route ${String(route.method)} ${route.url} declares no config.scope`);
  });
  // onRequest: the key is checked on the headers, before any body byte is read or parsed, so a
  // client without a valid key costs no body work (README.md, "Operations at a glance").
  app.addHook('onRequest', async (request, reply) => {
    try {
      const secret = presentedKey(request.headers);
      const principal =
        secret === undefined && request.headers.cookie !== undefined && request.routeOptions.config.modelCall?.traffic !== 'model'
          ? await sessionKey(ctx, request)
          : await ctx.authenticator.authenticate(secret, request.ip);
      request.principal = principal;
      // Before admission, so a refused request is not charged (the route's scope: src/routes/route-scope.ts).
      const scope = request.routeOptions.config.scope;
      if (scope) requireScope(principal.access, scope);
    } catch (refusal) {
      closeIfBodyUnread(reply);
      throw refusal;
    }
  });
  // preValidation: admission needs the parsed body (model, charge) and comes before input
  // validation, so a malformed request of a valid key is rate limited and carries the headers.
  app.addHook('preValidation', async (request, reply) => {
    await admitRequest(ctx, request, reply);
  });
  await app.register(apiKeyRoutes, { ctx });
  await app.register(projectRoutes, { ctx });
  await app.register(fineTuningRoutes, { ctx });
  await app.register(audioTranscriptionRoutes, { ctx });
  await app.register(assetRoutes, { ctx });
  await app.register(imageRoutes, { ctx });
  await app.register(audioSpeechRoutes, { ctx });
  await app.register(chatRoutes, { ctx });
  await app.register(completionRoutes, { ctx });
  await app.register(responseRoutes, { ctx });
  await app.register(messagesRoutes, { ctx });
  await app.register(conversationRoutes, { ctx });
  await app.register(modelRoutes, { ctx });
};
