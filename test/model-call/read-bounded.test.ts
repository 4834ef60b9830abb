import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/http/errors.js';
import { readBounded } from '../../src/model-call/upstream-call.js';

describe('readBounded', () => {
  it('returns every chunk of a reply, in order', async () => {
    const body = new PassThrough();
    const read = readBounded(body, 100);
    body.write('{"a":');
    body.write('1}');
    body.end();
    expect((await read).toString()).toBe('{"a":1}');
  });

  it('refuses a reply past the limit with a 502 and destroys it; a later error is swallowed', async () => {
    const body = new PassThrough();
    const read = readBounded(body, 8);
    body.write('12345');
    body.write('67890');
    const error = await read.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).statusCode).toBe(502);
    expect((error as ApiError).message).toMatch(/larger than the gateway accepts \(8 bytes\)/);
    expect(body.destroyed).toBe(true);
    // Without a listener this would be an uncaught error and end the process.
    body.emit('error', new Error('late'));
  });

  it('maps a reply that breaks off (an error, or a close before its end) to a 5xx', async () => {
    const reset = new PassThrough();
    const broken = readBounded(reset, 100);
    reset.write('{"partial"');
    reset.destroy(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    expect(await broken.catch((e: unknown) => (e as ApiError).statusCode)).toBe(503);

    const cut = new PassThrough();
    const closed = readBounded(cut, 100);
    cut.write('{"partial"');
    cut.destroy();
    expect(await closed.catch((e: unknown) => (e as ApiError).statusCode)).toBe(502);
  });
});
