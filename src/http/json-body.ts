import type { FastifyInstance } from 'fastify';
import { invalidParameter } from './errors.js';
import { exceedsJsonDepth } from './json-depth.js';

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The bytes of the request body as read off the connection, whatever its framing
     * (Content-Length or chunked); 0 when no body was parsed. What a stored conversation reserves.
     */
    bodyBytes: number;
  }
}

/**
 * JSON bodies: an empty body reads as `{}` (so "all fields optional" routes need none),
 * and a syntax error is a 400 naming the body rather than a framework message. Nesting
 * deeper than `maxDepth` is refused before parsing (bodies are bounded by the body limit,
 * so the one pass over the text is bounded too).
 */
export function installJsonParser(app: FastifyInstance, maxDepth: number): void {
  app.decorateRequest('bodyBytes', 0);
  app.removeAllContentTypeParsers();
  // Media types are case-insensitive and may carry parameters (`; charset=utf-8`, which many clients send).
  // Read as bytes: their count is the body's size even when it is chunked or not valid UTF-8.
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json\s*(;.*)?$/i, { parseAs: 'buffer' }, (request, body, done) => {
    const raw = body as Buffer;
    request.bodyBytes = raw.length;
    const text = raw.toString('utf8').trim();
    if (text === '') return done(null, {});
    if (exceedsJsonDepth(text, maxDepth)) {
      return done(invalidParameter(`The request body nests arrays and objects deeper than ${maxDepth} levels.`, 'body'), undefined);
    }
    try {
      done(null, JSON.parse(text));
    } catch {
      done(invalidParameter('The request body is not valid JSON.', 'body'), undefined);
    }
  });
}
