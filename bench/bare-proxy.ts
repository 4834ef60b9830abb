/**
 * The bare reference proxy: @fastify/http-proxy (reply-from over undici) with no auth, limits,
 * usage or logging. Prints {"port": n} when listening.
 */
import Fastify from 'fastify';
import httpProxy from '@fastify/http-proxy';

const app = Fastify({ logger: false });
await app.register(httpProxy, { upstream: process.env.BARE_UPSTREAM!, prefix: '/v1', rewritePrefix: '/fixed/v1' });

const address = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ port: Number(new URL(address).port) })}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
