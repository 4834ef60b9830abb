import type { FastifyPluginAsync } from 'fastify';
import type { AppContext } from '../app-context.js';
import { apiKeyRoutes } from './api-keys.js';
import { admitRequest } from '../quota/admission-hook.js';
import { projectRoutes } from './projects.js';
import { assetRoutes } from './assets.js';
import { audioSpeechRoutes } from './audio-speech.js';
import { imageRoutes } from './images.js';
import { audioTranscriptionRoutes } from './audio-transcriptions.js';
import { fineTuningRoutes } from './fine-tuning.js';
import { chatRoutes } from './chat.js';
import { conversationRoutes } from './conversations.js';
import { modelRoutes } from './models.js';
import { completionRoutes } from './completions.js';
import { responseRoutes } from './responses.js';

/** Everything under /v1: authenticated by a project key before any handler runs. */
export const v1Routes: FastifyPluginAsync<{ ctx: AppContext }> = async (app, { ctx }) => {
  app.decorateRequest('principal', null);
  app.decorateRequest('quota', null);
  // preValidation: authentication and admission come before input validation, so a
  // malformed request of a valid key is rate limited and carries the rate-limit headers.
  app.addHook('preValidation', async (request, reply) => {
    request.principal = await ctx.authenticator.authenticate(request.headers.authorization, request.ip);
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
  await app.register(conversationRoutes, { ctx });
  await app.register(modelRoutes, { ctx });
};
