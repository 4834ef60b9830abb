import { existsSync } from 'node:fs';
import { hash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import fastifyStatic from '@fastify/static';
import { Type } from 'typebox';
import type { AppContext } from './app-context.js';
import { scopesOfMask } from '../auth/key-access.js';
import { sessionCookieHeader, type ConsoleSession, type ConsoleSessions } from '../auth/console-session.js';
import { closeIfBodyUnread } from '../auth/unread-body.js';
import { hashSecret, isWellFormedSecret } from '../auth/key-format.js';
import { envelope, envelopeSchema } from '../http/envelope.js';
import { ApiError, consoleNotBuilt, invalidConsoleToken, noConsoleSession } from '../http/errors.js';
import { errorResponses, IsoTime, Nullable } from '../http/schemas.js';
import { consoleSessionOf, requireCsrf } from './console-auth.js';

/** No inline script or style, no framing, nothing loaded from elsewhere (DESIGN.md section 11). */
const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const SessionView = {
  role: Type.Union([Type.Literal('admin'), Type.Literal('key')]),
  project_id: Nullable(Type.String()),
  api_key_id: Nullable(Type.String()),
  /** null: the operator, who may do everything. */
  scopes: Nullable(Type.Array(Type.String())),
  expires_at: IsoTime,
  csrf_token: Type.String(),
};

const digest = (value: string) => hash('sha256', value, 'buffer');
const sameSecret = (given: string, expected: string) => timingSafeEqual(digest(given), digest(expected));

export interface ConsoleRoutesOptions {
  ctx: AppContext;
  sessions: ConsoleSessions;
  /** The built console (dist/console); a checkout that has not built it answers 503 naming the fix. */
  root: string;
}

/**
 * The web console: sign-in and sessions at /console/session, the built pages at /console/
 * (docs/console.md). Left out of /openapi.json: the browser's door, not part of the API.
 */
export const consoleRoutes: FastifyPluginAsyncTypebox<ConsoleRoutesOptions> = async (app, { ctx, sessions, root }) => {
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
    reply.header('x-frame-options', 'DENY');
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'no-referrer');
  });

  const viewOf = async (session: ConsoleSession) => {
    const principal = session.role === 'key' ? await ctx.authenticator.authenticateHash(session.keyHash) : null;
    return envelope('session', {
      role: session.role,
      project_id: principal?.projectId ?? null,
      api_key_id: principal?.keyId ?? null,
      scopes: principal ? scopesOfMask(principal.access.scopes) : null,
      expires_at: new Date(session.expiresAtMs).toISOString(),
      csrf_token: sessions.csrfToken(session),
    });
  };

  app.post(
    '/console/session',
    {
      bodyLimit: 4096,
      schema: {
        hide: true,
        summary: 'Console sign-in: the admin token or an API key for a session cookie (the secret is not kept)',
        body: Type.Object({ token: Type.String({ minLength: 1, maxLength: 512 }) }, { additionalProperties: false }),
        response: { 200: envelopeSchema(SessionView), ...errorResponses },
      },
    },
    async (request, reply) => {
      const { token } = request.body;
      const { session, cookie } = ctx.adminToken !== undefined && sameSecret(token, ctx.adminToken) ? sessions.issue({ role: 'admin' }) : await keySession(ctx, sessions, token, request.ip);
      reply.header('cache-control', 'no-store');
      reply.header('set-cookie', sessionCookieHeader(cookie, ctx.config.console.session_ttl_seconds, request.protocol === 'https'));
      request.log.info({ role: session.role, key_id: session.role === 'key' ? session.keyId : undefined }, 'console sign-in');
      return viewOf(session);
    },
  );

  app.get(
    '/console/session',
    { schema: { hide: true, summary: 'The console session of this browser, and its CSRF token', response: { 200: envelopeSchema(SessionView), ...errorResponses } } },
    async (request, reply) => {
      const session = consoleSessionOf(ctx, request);
      if (!session) throw noConsoleSession();
      reply.header('cache-control', 'no-store');
      return viewOf(session);
    },
  );

  app.delete('/console/session', { schema: { hide: true, summary: 'Console sign-out: clears the session cookie' } }, async (request, reply) => {
    const session = consoleSessionOf(ctx, request);
    if (session) requireCsrf(ctx, request, session);
    reply.header('set-cookie', sessionCookieHeader('', 0, request.protocol === 'https'));
    return reply.code(204).send();
  });

  app.get('/console', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/console/'));
  if (existsSync(root)) {
    await app.register(fastifyStatic, {
      root,
      prefix: '/console/',
      index: 'index.html',
      schemaHide: true,
      decorateReply: false,
      // Vite names built assets by their content: they never change under a name.
      setHeaders: (reply, path) => reply.header('cache-control', path.includes('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache'),
    });
  } else {
    app.get('/console/*', { schema: { hide: true } }, async (_request, reply) => {
      closeIfBodyUnread(reply);
      throw consoleNotBuilt();
    });
  }
};

/** A key's session; any refusal of the key reads as a wrong token (and is counted as one by the authenticator). */
async function keySession(ctx: AppContext, sessions: ConsoleSessions, token: string, clientAddress: string) {
  if (!isWellFormedSecret(token)) {
    await ctx.failedAttempts.count(clientAddress);
    throw invalidConsoleToken();
  }
  try {
    const principal = await ctx.authenticator.authenticate(token, clientAddress);
    return sessions.issue({ role: 'key', keyHash: hashSecret(token), projectId: principal.projectId, keyId: principal.keyId });
  } catch (error) {
    if (error instanceof ApiError && error.statusCode === 401) throw invalidConsoleToken();
    throw error;
  }
}
