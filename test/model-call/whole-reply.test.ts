import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/http/errors.js';
import { CallSignal } from '../../src/model-call/call-signal.js';
import { readBody } from '../../src/model-call/upstream-call.js';
import { ClientGone, mapUpstreamFailure } from '../../src/model-call/upstream-errors.js';
import { sendWhole } from '../../src/model-call/whole-reply.js';

const REPLY = JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(900) } }] });
const HALF = REPLY.slice(0, 100);

/**
 * sendWhole against a real socket and the undici the gateway runs on: these fail when an undici
 * upgrade changes the dispatch-handler API the reply is read through.
 */
describe('sendWhole (a JSON reply read whole through undici dispatch)', () => {
  let server: Server;
  let pool: Pool;
  /** URLs whose upstream connection closed, in order. */
  const closed: string[] = [];
  /** Bytes the /flood upstream managed to write before the gateway closed it. */
  let flooded = 0;

  function answer(request: IncomingMessage, response: ServerResponse): void {
    const url = request.url ?? '';
    response.once('close', () => closed.push(url));
    if (url === '/hints') response.writeEarlyHints({ link: '</a.css>; rel=preload; as=style' });
    if (url === '/processing') response.writeProcessing();
    if (url === '/error') {
      response.writeHead(500, { 'content-type': 'text/plain' });
      return void response.end('the backend failed');
    }
    if (url === '/flood') {
      response.writeHead(200, { 'content-type': 'application/json' });
      const piece = Buffer.alloc(64 * 1024, 'x');
      const more = () => {
        while (flooded < 50 * 1024 * 1024 && !response.destroyed) {
          flooded += piece.length;
          if (!response.write(piece)) return void response.once('drain', more);
        }
        response.end();
      };
      return more();
    }
    if (url === '/cut' || url === '/stall' || url === '/slow') {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': String(REPLY.length) });
      response.write(HALF);
      if (url === '/cut') setTimeout(() => response.socket?.destroy(), 20);
      return;
    }
    if (url === '/hang') return;
    if (url === '/reset') return void request.socket.destroy();
    response.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'yes' });
    // Two writes: the body may arrive in more than one chunk.
    response.write(REPLY.slice(0, 300));
    setTimeout(() => response.end(REPLY.slice(300)), 5);
  }

  beforeAll(async () => {
    server = createServer((request, response) => {
      request.resume();
      request.on('end', () => answer(request, response));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { pipelining: 1 });
  });
  afterAll(async () => {
    await pool.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const send = (path: string, { signal = new CallSignal(), limit = 64 * 1024, bodyTimeout = 10_000 } = {}) =>
    sendWhole(pool, { method: 'POST', path, headers: { 'content-type': 'application/json' }, body: '{}', headersTimeout: 10_000, bodyTimeout }, signal, limit);
  const until = async (check: () => boolean) => {
    while (!check()) await new Promise((resolve) => setTimeout(resolve, 5));
  };

  it('resolves with the status and parsed headers, and the whole body in `whole`', async () => {
    const response = await send('/plain');
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toBe('application/json');
    expect(response.headers['x-upstream']).toBe('yes');
    expect((await response.whole).toString()).toBe(REPLY);
  });

  it.each(['/hints', '/processing'])('skips an interim reply and answers with the final one (%s)', async (path) => {
    const response = await send(path);
    expect(response.status).toBe(200);
    expect((await response.whole).toString()).toBe(REPLY);
  });

  it('gives an error reply\'s text as a stream too', async () => {
    const response = await send('/error');
    expect(response.status).toBe(500);
    expect(await readBody(response.body)).toBe('the backend failed');
  });

  it('refuses a reply past the limit with a 502 and closes the upstream connection early', async () => {
    const response = await send('/flood', { limit: 256 * 1024 });
    const error = await response.whole.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ statusCode: 502, code: 'upstream_error' });
    expect((error as ApiError).message).toMatch(/larger than the gateway accepts \(262144 bytes\)/);
    await until(() => closed.includes('/flood'));
    expect(flooded).toBeLessThan(10 * 1024 * 1024);
  });

  it('a call cancelled while the reply arrives fails with the signal\'s reason and closes the upstream connection', async () => {
    const signal = new CallSignal();
    const response = await send('/stall', { signal });
    const gone = new ClientGone();
    signal.abort(gone);
    expect(await response.whole.catch((e: unknown) => e)).toBe(gone);
    await until(() => closed.includes('/stall'));
  });

  it('a call cancelled before the headers rejects with the signal\'s reason and closes the upstream connection', async () => {
    const signal = new CallSignal();
    const pending = send('/hang', { signal });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const gone = new ClientGone();
    signal.abort(gone);
    expect(await pending.catch((e: unknown) => e)).toBe(gone);
    await until(() => closed.includes('/hang'));
  });

  it('a call cancelled before it was sent rejects with the signal\'s reason', async () => {
    const signal = new CallSignal();
    const gone = new ClientGone();
    signal.abort(gone);
    expect(await send('/plain', { signal }).catch((e: unknown) => e)).toBe(gone);
  });

  it('a reply cut off after its headers is an unreadable reply: 502 upstream_error, not 503 upstream_unavailable', async () => {
    const response = await send('/cut');
    const error = await response.whole.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ statusCode: 502, type: 'upstream_error', code: 'upstream_error' });
    expect(mapUpstreamFailure(error)).toBe(error);
  });

  it('a connection closed before any answer stays an unreachable backend (503, another target may serve)', async () => {
    const error = await send('/reset').catch((e: unknown) => e);
    expect(mapUpstreamFailure(error)).toMatchObject({ statusCode: 503, code: 'upstream_unavailable' });
  });

  it('a reply that stalls after its headers is a body timeout (504 upstream_timeout)', async () => {
    const response = await send('/slow', { bodyTimeout: 100 });
    const error = await response.whole.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ statusCode: 504, code: 'upstream_timeout' });
  });
});
