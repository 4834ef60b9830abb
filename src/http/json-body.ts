import type { FastifyInstance } from 'fastify';
import { invalidParameter } from './errors.js';
import { exceedsJsonDepth } from './json-depth.js';

/**
 * JSON bodies: an empty body reads as `{}` (so "all fields optional" routes need none),
 * and a syntax error is a 400 naming the body rather than a framework message. Nesting
 * deeper than `maxDepth` is refused before parsing (bodies are bounded by the body limit,
 * so the one pass over the text is bounded too).
 */
export function installJsonParser(app: FastifyInstance, maxDepth: number): void {
  app.removeAllContentTypeParsers();
  // Media types are case-insensitive and may carry parameters (`; charset=utf-8`, which many clients send).
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json\s*(;.*)?$/i, { parseAs: 'string' }, (_request, body, done) => {
    const text = (body as string).trim();
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
