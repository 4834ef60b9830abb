import type { FastifyInstance } from 'fastify';
import { invalidParameter } from './errors.js';

/**
 * JSON bodies: an empty body reads as `{}` (so "all fields optional" routes need none),
 * and a syntax error is a 400 naming the body rather than a framework message.
 */
export function installJsonParser(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json$/, { parseAs: 'string' }, (_request, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, {});
    try {
      done(null, JSON.parse(text));
    } catch {
      done(invalidParameter('The request body is not valid JSON.', 'body'), undefined);
    }
  });
}
