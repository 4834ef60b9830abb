import type { FastifyRequest } from 'fastify';
import { CSRF_HEADER, sessionCookieOf, type ConsoleSession } from '../auth/console-session.js';
import { invalidCsrfToken } from '../http/errors.js';
import type { AppContext } from './app-context.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The console session the request's cookie holds (src/auth/console-session.ts), or null. */
export function consoleSessionOf(ctx: AppContext, request: FastifyRequest): ConsoleSession | null {
  if (!ctx.sessions || request.headers.cookie === undefined) return null;
  return ctx.sessions.open(sessionCookieOf(request.headers.cookie));
}

/** A cookie rides along with any request the browser makes, so a state-changing one must also show the session's CSRF token. */
export function requireCsrf(ctx: AppContext, request: FastifyRequest, session: ConsoleSession): void {
  if (SAFE_METHODS.has(request.method)) return;
  if (!ctx.sessions!.checkCsrf(session, request.headers[CSRF_HEADER])) throw invalidCsrfToken();
}
