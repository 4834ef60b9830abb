/**
 * Bare passthroughs with no auth, limits, usage or logging, for comparison with the gateway:
 *   BARE_MODE=http-proxy  @fastify/http-proxy (reply-from over undici), the field's default;
 *   BARE_MODE=undici      a Fastify route piping an undici Pool request, the gateway's mechanism.
 * Prints {"port": n} when listening.
 */
import Fastify from 'fastify';
import httpProxy from '@fastify/http-proxy';
import { Pool } from 'undici';

const upstream = process.env.BARE_UPSTREAM!;
const mode = process.env.BARE_MODE ?? 'http-proxy';
const app = Fastify({ logger: false });

if (mode === 'http-proxy') {
  await app.register(httpProxy, { upstream, prefix: '/v1', rewritePrefix: '/fixed/v1', http: undefined });
} else {
  const pool = new Pool(upstream, { pipelining: 1, keepAliveTimeout: 30_000 });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  app.post('/v1/chat/completions', async (request, reply) => {
    const response = await pool.request({
      method: 'POST',
      path: '/fixed/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: request.body as Buffer,
    });
    reply.code(response.statusCode).header('content-type', response.headers['content-type'] as string);
    return reply.send(response.body);
  });
}

const address = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ port: Number(new URL(address).port) })}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
