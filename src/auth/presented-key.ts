import type { IncomingHttpHeaders } from 'node:http';
import { conflictingApiKeys } from '../http/errors.js';
import { bearerToken } from './authenticator.js';

/**
 * The key a request presents: `Authorization: Bearer <key>` (OpenAI's SDKs) or `x-api-key: <key>`
 * (Anthropic's SDKs and Claude Code). Both sent and different is a 401: which one a proxy in
 * front judged cannot be known.
 */
export function presentedKey(headers: IncomingHttpHeaders): string | undefined {
  const bearer = bearerToken(headers.authorization);
  const header = headers['x-api-key'];
  const apiKey = typeof header === 'string' ? header.trim() : undefined;
  if (bearer !== undefined && apiKey !== undefined && apiKey !== bearer) throw conflictingApiKeys();
  return bearer ?? (apiKey === '' ? undefined : apiKey);
}
