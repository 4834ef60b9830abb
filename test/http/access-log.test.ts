import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import { addLogFields, installAccessLog } from '../../src/http/access-log.js';
import { createLogger } from '../../src/core/logger.js';
import { buildTestApp, createProject, type TestApp } from '../support/test-app.js';

/** A destination that keeps every line written to it. */
function capture(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      callback();
    },
  });
  return { stream, lines };
}

const config = defaultConfig({ models: [{ id: 'echo-1', provider: 'echo' }] });

describe('access log line', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it("is one JSON line per request with the route's fields, in the logger's format", async () => {
    const { stream, lines } = capture();
    t = await buildTestApp('memory', { config, deps: { logger: createLogger('info', stream) } });
    const { secret, projectId } = await createProject(t.app);
    const response = await t.app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: { authorization: `Bearer ${secret}`, 'x-request-id': 'req-access-1' },
      payload: { model: 'echo-1', messages: [{ role: 'user', content: 'say "hi"\n' }] },
    });
    expect(response.statusCode).toBe(200);
    const line = lines.find((candidate) => candidate.includes('"request_id":"req-access-1"') && candidate.includes('request completed'));
    expect(line).toBeDefined();
    const parsed = JSON.parse(line!) as Record<string, unknown>;
    expect(parsed).toMatchObject({
      level: 30,
      pid: process.pid,
      request_id: 'req-access-1',
      method: 'POST',
      route: '/v1/chat/completions',
      status_code: 200,
      project_id: projectId,
      model: 'echo-1',
      operation: 'chat',
      stream: false,
      outcome: 'completed',
      conversation_id: null,
      msg: 'request completed',
    });
    expect(typeof parsed.time).toBe('number');
    expect(typeof parsed.response_time_ms).toBe('number');
    expect(parsed.prompt_tokens).toBeGreaterThan(0);
    // Key for key what pino writes for the same fields (pino's bindings first, the message last).
    const reference = capture();
    const bindings = { pid: process.pid, hostname: parsed.hostname, request_id: 'req-access-1' };
    const fields = Object.fromEntries(Object.entries(parsed).filter(([key]) => !['level', 'time', 'msg', ...Object.keys(bindings)].includes(key)));
    pino({ base: bindings, timestamp: () => `,"time":${parsed.time as number}` }, reference.stream).info(fields, 'request completed');
    await new Promise((resolve) => setImmediate(resolve));
    expect(line).toBe(reference.lines[0]);
  });

  it('writes nothing below info, and lets pino censor a field a redaction path names', async () => {
    const probe = async (level: string) => {
      const { stream, lines } = capture();
      const app = Fastify({ loggerInstance: createLogger(level, stream) as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: true }) });
      installAccessLog(app);
      app.addHook('onRequest', (request, _reply, done) => {
        addLogFields(request, { secret: 'sk-should-never-appear', api_key: { secret: 'sk-nested' }, model: 'm' }, 'unused');
        done();
      });
      app.get('/probe', async () => ({ ok: true }));
      expect((await app.inject({ method: 'GET', url: '/probe' })).statusCode).toBe(200);
      await app.close();
      return lines.filter((line) => line.includes('request completed'));
    };
    expect(await probe('warn')).toEqual([]);
    const [line, ...more] = await probe('info');
    expect(more).toEqual([]);
    expect(line).not.toContain('sk-should-never-appear');
    expect(line).not.toContain('sk-nested');
    expect(JSON.parse(line!)).toMatchObject({ secret: '[redacted]', api_key: { secret: '[redacted]' }, model: 'm', route: '/probe', status_code: 200 });
  });

  it('writes what pino writes for a key the logger serializes, a key the fields only inherit, and a request whose address is gone', async () => {
    const { stream, lines } = capture();
    const app = Fastify({ loggerInstance: createLogger('info', stream) as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: true }) });
    installAccessLog(app);
    app.addHook('onRequest', (request, _reply, done) => {
      addLogFields(request, Object.assign(Object.create({ inherited: 'from-prototype' }) as Record<string, unknown>, { model: 'm' }), 'unused');
      if (request.url === '/serialized') addLogFields(request, { res: 'not-a-response' }, 'unused');
      if (request.url === '/gone') Object.defineProperty(request, 'ip', { value: undefined });
      done();
    });
    // The same field through pino and the request's logger (fastify's serializers): what the access line must hold.
    app.get('/serialized', async (request) => {
      request.log.info({ res: 'not-a-response' }, 'reference');
      return { ok: true };
    });
    app.get('/gone', async () => ({ ok: true }));
    for (const url of ['/serialized', '/gone']) expect((await app.inject({ method: 'GET', url })).statusCode).toBe(200);
    await app.close();
    const parse = (line: string) => JSON.parse(line) as Record<string, unknown>;
    const written = lines.filter((candidate) => candidate.includes('request completed')).map(parse);
    const reference = lines.filter((candidate) => candidate.includes('"reference"')).map(parse);
    expect(written).toHaveLength(2);
    expect(reference).toHaveLength(1);
    for (const parsed of written) {
      expect(parsed.model).toBe('m');
      expect(parsed).not.toHaveProperty('inherited');
    }
    expect(reference[0]!.res).not.toBe('not-a-response');
    expect(written[0]!.res).toEqual(reference[0]!.res);
    expect(written[1]!).not.toHaveProperty('client_address');
    expect(written[1]!).toMatchObject({ route: '/gone', status_code: 200 });
  });

  it('merges fields added twice, and lets a route field replace a base field once, in its place', async () => {
    const { stream, lines } = capture();
    const app = Fastify({ loggerInstance: createLogger('info', stream) as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: true }) });
    installAccessLog(app);
    app.addHook('onRequest', (request, _reply, done) => {
      addLogFields(request, { model: 'm', outcome: 'first' }, 'unused');
      addLogFields(request, { outcome: 'second', route: '/renamed' }, 'unused');
      done();
    });
    app.get('/probe', async () => ({ ok: true }));
    expect((await app.inject({ method: 'GET', url: '/probe' })).statusCode).toBe(200);
    await app.close();
    const [line] = lines.filter((candidate) => candidate.includes('request completed'));
    expect(line!.match(/"route":/g)).toHaveLength(1);
    const parsed = JSON.parse(line!) as Record<string, unknown>;
    expect(parsed).toMatchObject({ route: '/renamed', model: 'm', outcome: 'second', method: 'GET' });
    expect(Object.keys(parsed).indexOf('route')).toBeLessThan(Object.keys(parsed).indexOf('status_code'));
  });
});
